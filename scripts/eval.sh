#!/usr/bin/env bash
# make eval: memory quality without an LLM judge. Builds the gateway, replays
# synthetic multi-session conversations through it (stand-in upstream, temp
# SQLite), probes every planted fact at 1k/2k/4k/8k-token budgets next to
# last-N truncation and full-history baselines, and prints a markdown table.
# The table is also written to $EVAL_OUT (default eval-results.md).
# Extra arguments go to the command (see: go run ./eval/cmd/eval -h).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./eval/cmd/eval -out "${EVAL_OUT:-eval-results.md}" "$@"
