#!/usr/bin/env bash
# eval.sh — memgate's memory-quality evaluation (`make eval`), no LLM judge.
# Builds the gateway, replays synthetic multi-session conversations through it
# (a stand-in upstream doubling as summariser and fact extractor, a temp
# SQLite store), probes every planted item at 1k/2k/4k/8k-token budgets next
# to last-N truncation and full-history baselines, prints the markdown report
# and folds it into its own section of BENCHMARKS.md (<!-- bench:eval:... -->).
# About 2–3 minutes on 2 cores.
#
#   EVAL_OUT=other.md scripts/eval.sh     # update another file instead
#   EVAL_DETAILS=probes.jsonl scripts/eval.sh   # also one JSON line per probe
#   scripts/eval.sh -users 8 -seed 7      # extra arguments go to the command
#                                         # (go run ./eval/cmd/eval -h)
set -euo pipefail
cd "$(dirname "$0")/.."

out="${EVAL_OUT:-BENCHMARKS.md}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

args=(-out "$tmp/eval.md")
if [ -n "${EVAL_DETAILS:-}" ]; then
	args+=(-details "$EVAL_DETAILS")
fi
go run ./eval/cmd/eval "${args[@]}" "$@"
go run ./bench/cmd/bench fold -out "$out" -section eval "$tmp/eval.md"
echo "eval: report folded into $out" >&2
