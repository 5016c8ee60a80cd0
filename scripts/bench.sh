#!/usr/bin/env bash
# bench.sh — memgate's overhead benchmark (`make bench`).
#
# Starts a fake upstream, a bare httputil.ReverseProxy and the gateway as
# separate processes, drives each at 1, 16 and 64 connections with the
# project's own load generator (bench/loadgen), runs the Go micro-benchmarks
# of internal/tokens and internal/proxy, writes BENCHMARKS.md and prints the
# tables. About 2–3 minutes. Extra arguments go to the benchmark, e.g.
#   scripts/bench.sh -conns 1,16,64,256 -duration 10s
#   scripts/bench.sh -rate 2000            # open loop at 2000 req/s per cell
#   scripts/bench.sh -upstream-latency 20ms
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./bench/cmd/bench -out BENCHMARKS.md "$@"
