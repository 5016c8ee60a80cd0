# memgate — developer entry points. `make test` installs and starts the
# services the tests need (PostgreSQL 15 + pgvector, Redis, Chromium) when missing.

GO       ?= go
BIN      ?= bin/gateway
PKGS     ?= ./...
PGBASE   ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
REDISURL ?= redis://127.0.0.1:6379/0

.PHONY: all build run demo test test-short services bench bench-search-1m eval lint fmt vet migrate clean

all: lint test

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/gateway

## run: start the gateway on its embedded default (SQLite under ./data).
run: build
	./$(BIN) serve

## demo: a scripted multi-session conversation through memgate and a local stand-in upstream (no API key, no services).
demo:
	bash scripts/demo.sh

## services: install (apt) and start PostgreSQL 15 + pgvector and Redis, and install Chromium (browser test), when missing.
services:
	bash scripts/services.sh

# RACEGCFLAGS: -race turns on the compiler's checkptr checks in every
# package; in modernc.org's SQLite (C translated to Go, pointer arithmetic
# on its own heap in every statement) they took half of the CPU of the
# SQLite-heavy tests (internal/engine/recall, cmd/gateway). They check that
# library's unsafe conversions, none of ours: the race detector still
# instruments it, and checkptr still checks every memgate package.
RACEGCFLAGS ?= modernc.org/...=-d=checkptr=0

## test: every test, against real PostgreSQL + pgvector and Redis, and the inspector in headless Chromium. Fails if any is missing.
test: services
	MEMGATE_TEST_POSTGRES_URL="$(PGBASE)" MEMGATE_TEST_REDIS_URL="$(REDISURL)" \
		$(GO) test -race -gcflags='$(RACEGCFLAGS)' -count=1 -timeout 40m $(PKGS)

## test-short: unit tests only (integration tests skip under -short).
test-short:
	$(GO) test -short -count=1 $(PKGS)

## bench: load benchmarks and Go micro-benchmarks; rewrites BENCHMARKS.md.
bench: services
	bash scripts/bench.sh

## bench-search-1m: the recall search benchmark alone at 1M items (20-30 min on 2 cores: too long for `make bench`); writes its own section of BENCHMARKS.md.
bench-search-1m: services
	BENCH_SEARCH_ONLY=1 BENCH_SEARCH_SIZES=1000000 BENCH_SEARCH_BUDGET=60m BENCH_SEARCH_SECTION=search-1m \
		bash scripts/bench.sh

## eval: memory-quality evaluation (synthetic conversations, probes, baselines) on SQLite and on PostgreSQL + Redis; writes its tables into BENCHMARKS.md.
## With LOCOMO=path/to/locomo10.json, LoCoMo too (LOCOMO_CONVERSATIONS=1,2 for a subset, LOCOMO_CLIENTS=newest for one client).
eval: services
	LOCOMO="$(LOCOMO)" LOCOMO_CONVERSATIONS="$(LOCOMO_CONVERSATIONS)" LOCOMO_CLIENTS="$(LOCOMO_CLIENTS)" bash scripts/eval.sh

## lint: gofmt, go vet, and go.mod/go.sum as `go mod tidy` leaves them.
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }

## vet: go vet over every package.
vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

migrate: build
	./$(BIN) migrate

clean:
	rm -rf bin data
