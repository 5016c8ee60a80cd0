#!/usr/bin/env bash
# bench.sh — memgate's benchmarks (`make bench`); rewrites their sections of
# BENCHMARKS.md and prints them. About 15 minutes on 2 cores.
#
# 1. Overhead (go run ./bench/cmd/bench): a fake upstream, a bare
#    httputil.ReverseProxy and two gateways (SQLite; PostgreSQL + Redis) as
#    separate processes, driven by the project's own load generator at 1, 16,
#    64 and 256 connections, streaming and not, memory off and on; capture
#    throughput and lag; the gateway's RSS over 100k memory-on requests
#    (within -rss-budget, default 5m); the Go micro-benchmarks, including the
#    token curve of issue #4 (prompt tokens sent against the full history).
#    Then the remote-embedding cell, and the hostile-input cell (issue 24:
#    CPU per request of each input of bench/pathological, BENCH_HOSTILE_RUNS
#    runs each, default 3).
# 2. Recall search on PostgreSQL + pgvector (go run ./bench/search), when
#    present, at BENCH_SEARCH_SIZES (default 10000,100000), within
#    BENCH_SEARCH_BUDGET (default 4m), folded into BENCHMARKS.md's section
#    BENCH_SEARCH_SECTION (default search). BENCH_SEARCH_SIZES=none skips it.
#
# BENCH_SEARCH_ONLY=1 runs the search benchmark alone. The 1M-item run does
# not fit the 15 minutes (on 2 cores loading 1M items takes 1.5-4 min and the
# HNSW build 17-23 min); `make bench-search-1m` runs it on its own (20-30 min):
#   BENCH_SEARCH_ONLY=1 BENCH_SEARCH_SIZES=1000000 BENCH_SEARCH_BUDGET=60m \
#     BENCH_SEARCH_SECTION=search-1m scripts/bench.sh
#
# Services: PostgreSQL at MEMGATE_BENCH_POSTGRES_URL (default
# postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable; the benchmarks
# create and drop throwaway databases on it) and Redis at
# MEMGATE_BENCH_REDIS_URL (default redis://127.0.0.1:6379/0, under a unique
# key prefix). `make bench` starts them first.
#
# Extra arguments go to the overhead benchmark, e.g.
#   scripts/bench.sh -conns 1,64 -duration 10s
#   scripts/bench.sh -rate 2000            # open loop at 2000 req/s per cell
#   scripts/bench.sh -upstream-latency 20ms
#   scripts/bench.sh -rss-requests 0       # skip the sustained run
set -euo pipefail
cd "$(dirname "$0")/.."

out=BENCHMARKS.md
export MEMGATE_BENCH_POSTGRES_URL="${MEMGATE_BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}"
export MEMGATE_BENCH_REDIS_URL="${MEMGATE_BENCH_REDIS_URL:-redis://127.0.0.1:6379/0}"
search_sizes="${BENCH_SEARCH_SIZES:-10000,100000}"
search_budget="${BENCH_SEARCH_BUDGET:-4m}"
search_section="${BENCH_SEARCH_SECTION:-search}"
search_only="${BENCH_SEARCH_ONLY:-0}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
started=$(date +%s)
status=0

# Built once: the benchmark re-executes itself for its server processes.
go build -o "$tmp/bench" ./bench/cmd/bench
if [ "$search_only" != "1" ]; then
	MEMGATE_BENCH_COMMAND="make bench" "$tmp/bench" -out "$out" "$@"
fi

# fold NAME FILE puts FILE into the NAME section of BENCHMARKS.md.
fold() { "$tmp/bench" fold -out "$out" -section "$1" "$2"; }

# The remote-embedding cell: an OpenAI-compatible embeddings endpoint
# answering in 200 ms, default settings (go run ./bench/cmd/bench embed-cell).
if [ "$search_only" != "1" ]; then
	echo "remote-embedding cell ..." >&2
	if "$tmp/bench" embed-cell -embed-latency 200ms >"$tmp/embed.md"; then
		fold embed-cell "$tmp/embed.md"
		cat "$tmp/embed.md"
	else
		echo "bench.sh: the remote-embedding cell failed" >&2
		status=1
	fi
fi

# The prompt-cache cell (issue 28): a 100-turn conversation replayed through
# the real gateway at a 4,000-token budget, newest-only, full-history and
# full-history on the Responses API; the
# share of each prompt that repeats the previous request's prefix and the
# estimated input-cost saving at OpenAI's and Anthropic's cache prices
# (assumptions in cmd/gateway/promptcache_bench_test.go).
if [ "$search_only" != "1" ]; then
	echo "prompt-cache cell ..." >&2
	if go test -count=1 -run '^TestPromptCacheShare$' -v ./cmd/gateway >"$tmp/cache.log" 2>&1; then
		{
			echo "## Prompt cache: repeated prefix and input-cost saving"
			echo
			echo "100-turn synthetic conversation through the real gateway (SQLite, default memory, compaction and recall), X-Memory-Budget 4000, prompts of 4,000 characters or more. Share: mean fraction of each prompt's bytes equal to the previous request's from the first byte. Saving: OpenAI cached input at 50% (GPT-4o) or 25% (GPT-4.1) of input; Anthropic reads at 10%, writes at 125%, breakpoint after the stable part (\`go test -run TestPromptCacheShare -v ./cmd/gateway\`)."
			echo
			echo "| client | prompts | repeated share | saving OpenAI (50% off) | saving OpenAI (75% off) | saving Anthropic |"
			echo "|---|---|---|---|---|---|"
			sed -n 's/.*prompt-cache \([a-z-]*\) prompts=\([0-9]*\) share=\([0-9.]*\) openai50=\([0-9.]*\) openai75=\([0-9.]*\) anthropic=\([0-9.-]*\).*/| \1 | \2 | \3 | \4 | \5 | \6 |/p' "$tmp/cache.log"
		} >"$tmp/cache.md"
		fold prompt-cache "$tmp/cache.md"
		cat "$tmp/cache.md"
	else
		cat "$tmp/cache.log" >&2
		echo "bench.sh: the prompt-cache cell failed" >&2
		status=1
	fi
fi

# The hostile-input cell (issue 24): CPU per request of each input of
# bench/pathological through the whole gateway (go run ./bench/cmd/bench hostile).
if [ "$search_only" != "1" ]; then
	echo "hostile-input cell ..." >&2
	if "$tmp/bench" hostile -runs "${BENCH_HOSTILE_RUNS:-3}" >"$tmp/hostile.md"; then
		fold hostile "$tmp/hostile.md"
		cat "$tmp/hostile.md"
	else
		echo "bench.sh: the hostile-input cell failed" >&2
		status=1
	fi
fi

# The offline embedders' cell: the built-in encoder against the hashed local
# embedder on SQLite, at 1 and 64 connections (go run ./bench/cmd/bench encoder-cell).
if [ "$search_only" != "1" ]; then
	echo "encoder cell ..." >&2
	if "$tmp/bench" encoder-cell >"$tmp/encoder.md"; then
		fold encoder-cell "$tmp/encoder.md"
		cat "$tmp/encoder.md"
	else
		echo "bench.sh: the encoder cell failed" >&2
		status=1
	fi
fi

if [ -f bench/search/main.go ] && [ "$search_sizes" != "none" ]; then
	echo "recall search benchmark: sizes $search_sizes, budget $search_budget, section $search_section ..." >&2
	title="Recall search on PostgreSQL + pgvector"
	if [ "$search_section" != "search" ]; then
		title="$title — sizes $search_sizes (make bench-search-1m)"
	fi
	if go run ./bench/search -db "$MEMGATE_BENCH_POSTGRES_URL" -sizes "$search_sizes" \
		-budget "$search_budget" -title "$title" -out "$tmp/search.md" >/dev/null; then
		fold "$search_section" "$tmp/search.md"
		cat "$tmp/search.md"
	else
		echo "bench.sh: the recall search benchmark failed" >&2
		status=1
	fi
fi

echo "bench.sh: done in $(( $(date +%s) - started ))s; results in $out" >&2
exit $status
