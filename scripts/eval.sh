#!/usr/bin/env bash
# eval.sh — memgate's memory-quality evaluation (`make eval`), no LLM judge.
# Builds the gateway and loads long synthetic conversations into it through
# POST /v1/memory/import, every message with the time it was said: two
# friends who call each other by name over 24 dated sessions (864 turns
# each), a stand-in upstream that writes summaries and extracts facts, a
# temp SQLite store (then again on PostgreSQL + pgvector behind Redis). Then it
# asks 50 questions per conversation (single-hop, adjacent answer,
# multi-hop, temporal, paraphrase) at 4k/8k-token budgets and reports the
# share of evidence turns that reached the upstream prompt, by question type
# and by depth, next to last-N truncation and BM25-over-turns baselines at
# the same budgets; it folds the markdown into its own section of
# BENCHMARKS.md (<!-- bench:eval:... -->). About 2 minutes on 2 cores.
#
#   EVAL_OUT=other.md scripts/eval.sh            # update another file instead
#   EVAL_DETAILS=questions.jsonl scripts/eval.sh # also one JSON line per judged question
#   scripts/eval.sh -users 5 -seed 7             # extra arguments go to the command
#                                                # (go run ./eval/cmd/eval -h)
#   scripts/eval.sh -deliver chat                # replay turn by turn as chat completions
#                                                # (each turn's time in X-Memory-Timestamp)
#
# LoCoMo (issue 26), when LOCOMO names its locomo10.json (the public
# snap-research/LoCoMo data, never committed here): replayed as a
# newest-only client and as a full-history client, questions at 4,000
# tokens, beside BM25 over single turns; folded into its own section
# (<!-- bench:eval-locomo:... -->). The gateway runs as out of the box, with
# no side-model key (-side-model stand-in gives it the stand-in as one), and
# each exchange is sent once the previous one is enriched, so two runs of a
# build agree (-pace saved: faster, but summaries and facts then depend on
# timing). About 10 minutes on 2 cores.
#
#   LOCOMO=/work/data/locomo10.json scripts/eval.sh
#   LOCOMO=... LOCOMO_CONVERSATIONS=1,2 LOCOMO_CLIENTS=newest EVAL_SYNTH=0 EVAL_POSTGRES=0 scripts/eval.sh
#                                                # a quick iteration: two conversations, LoCoMo only
set -euo pipefail
cd "$(dirname "$0")/.."

out="${EVAL_OUT:-BENCHMARKS.md}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

args=(-out "$tmp/eval.md")
if [ -n "${EVAL_DETAILS:-}" ]; then
	args+=(-details "$EVAL_DETAILS")
fi
if [ "${EVAL_SYNTH:-1}" != 0 ]; then
	go run ./eval/cmd/eval "${args[@]}" "$@"
	go run ./bench/cmd/bench fold -out "$out" -section eval "$tmp/eval.md"
	echo "eval: report folded into $out" >&2
fi

if [ -n "${LOCOMO:-}" ]; then
	if [ -f "$LOCOMO" ]; then
		lo=(-locomo "$LOCOMO" -client "${LOCOMO_CLIENTS:-newest,full}" -out "$tmp/locomo.md")
		if [ -n "${LOCOMO_CONVERSATIONS:-}" ]; then
			lo+=(-conversations "$LOCOMO_CONVERSATIONS")
		fi
		if [ -n "${EVAL_DETAILS:-}" ]; then
			lo+=(-details "$EVAL_DETAILS.locomo")
		fi
		go run ./eval/cmd/eval "${lo[@]}"
		go run ./bench/cmd/bench fold -out "$out" -section eval-locomo "$tmp/locomo.md"
		echo "eval: LoCoMo report folded into $out" >&2
	else
		echo "eval: LOCOMO=$LOCOMO is not a file: LoCoMo skipped" >&2
	fi
fi

# The same evaluation on PostgreSQL + pgvector behind Redis, the deployment
# of many gateways: recall must be as good there (EVAL_POSTGRES=0 skips it).
if [ "${EVAL_POSTGRES:-1}" != 0 ]; then
	pg="${EVAL_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}"
	rd="${EVAL_REDIS_URL:-redis://127.0.0.1:6379/0}"
	go run ./eval/cmd/eval -out "$tmp/eval-pg.md" -postgres-url "$pg" -redis-url "$rd" "$@"
	go run ./bench/cmd/bench fold -out "$out" -section eval-pg "$tmp/eval-pg.md"
	echo "eval: PostgreSQL + Redis report folded into $out" >&2
fi
