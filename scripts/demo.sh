#!/usr/bin/env bash
# make demo: the real gateway on its embedded default (temp SQLite) in front
# of a local stand-in upstream (not a model), playing a scripted three-session
# conversation and printing what memgate sends upstream at each turn.
# No API key, no services. Extra arguments go to the command
# (see: go run ./cmd/demo -h).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./cmd/demo "$@"
