# tokentriage: governance for LLM API traffic, enforced inside the proxy.
#
#   make run     build everything and run the whole system on 127.0.0.1
#   make reload  re-read the config of the system make run started (SIGHUP)
#   make fleet   a redis-server and three dev replicas sharing it and one runtime plane
#                (PORT=9300 REDIS_PORT=9390 REPLICAS=2 move and size it)
#   make test    build the filter and run every test
#   make check   formatting, vet, the wasip1 builds, tests, and a tidy go.mod
#   make bench   the benchmarks BENCHMARKS.md reports
#   make profile-guest
#                where a governed request's time in the filter goes, per
#                guest export (wasmtest's per-export timing)
#   make bench-guest PKG=./shared/llm BENCH=Stream
#                the benchmarks of a pure package compiled to wasm and run in
#                wazero, timed in CPU time (internal/wasmexec): what the code
#                costs inside the filter's module

export PATH := /usr/local/go/bin:$(PATH)
GO        ?= go
WASM      := build/filter.wasm
NOOP_WASM := build/noop.wasm
CLI       := bin/tokentriage
WASM_ENV  := GOOS=wasip1 GOARCH=wasm
WASM_FLAGS := -buildmode=c-shared -trimpath -ldflags='-s -w'
TEST_ENV  := TT_FILTER_WASM=$(abspath $(WASM)) TT_NOOP_WASM=$(abspath $(NOOP_WASM))

# The tag of the filter's OCI image: the one envoy/istio/wasmplugin.yaml's
# url names.
OCI_TAG   ?= v0.1.0

.PHONY: all build wasm cli run reload fleet test check bench bench-guest profile-guest clean oci

all: build

build: wasm cli

wasm:
	@mkdir -p build
	$(WASM_ENV) $(GO) build $(WASM_FLAGS) -o $(WASM) ./cmd/filter
	$(WASM_ENV) $(GO) build $(WASM_FLAGS) -o $(NOOP_WASM) ./cmd/noopfilter

# The release tokentriage version prints: git describe of the tree built.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)

cli:
	@mkdir -p bin
	$(GO) build -trimpath -ldflags='-X main.version=$(VERSION)' -o $(CLI) ./cmd/tokentriage

# The filter as the OCI image an Istio WasmPlugin pulls, in build/oci (an
# OCI image layout: push it with crane, oras or skopeo), its digest pinned
# in envoy/istio/wasmplugin.yaml.
oci: wasm
	$(GO) run ./cmd/wasmoci -wasm $(WASM) -out build/oci -tag $(OCI_TAG) -pin envoy/istio/wasmplugin.yaml -pin envoy/istio/hold-headers/filter.yaml

# make run LISTEN=127.0.0.1:9790 ACCOUNTANT_LISTEN=127.0.0.1:9791 moves the
# two addresses (two dev systems side by side, or a port already taken).
LISTEN            ?= 127.0.0.1:8790
ACCOUNTANT_LISTEN ?= 127.0.0.1:8791
CONFIG            ?= examples/tokentriage.yaml
DATA              ?= .tt-data

run: build
	exec $(CLI) dev -c $(CONFIG) --wasm $(WASM) --listen $(LISTEN) --accountant-listen $(ACCOUNTANT_LISTEN) --data $(DATA)

# make run's dev is a child of make, and make passes no SIGHUP on: this
# sends it to dev itself, by the pid it keeps in its data directory.
reload:
	@test -f $(DATA)/dev.pid || { echo "no $(DATA)/dev.pid: is make run (or tokentriage dev --data $(DATA)) running?"; exit 1; }
	kill -HUP $$(cat $(DATA)/dev.pid)

# make fleet PORT=9300 REDIS_PORT=9390 moves the fleet's ports: replica
# n's gateway is PORT+2n, its accountant PORT+2n+1 (REPLICAS=N, 1 to 9,
# changes how many).
FLEET_PORT ?= $(or $(PORT),8790)
REDIS_PORT ?= 6390
REPLICAS   ?= 3

fleet: build
	CLI=$(CLI) WASM=$(WASM) PORT=$(FLEET_PORT) REDIS_PORT=$(REDIS_PORT) REPLICAS=$(REPLICAS) scripts/fleet.sh

test: wasm
	$(TEST_ENV) $(GO) test -timeout 25m ./...

check: wasm
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt: the files above need formatting'; exit 1; }
	$(GO) vet ./...
	$(WASM_ENV) $(GO) build ./shared/...
	$(WASM_ENV) $(GO) vet ./shared/... ./filter/...
	$(TEST_ENV) $(GO) test -timeout 25m ./...
	$(GO) mod tidy && git diff --exit-code go.mod go.sum

bench: wasm
	$(TEST_ENV) $(GO) test -run '^$$' -bench . -benchmem ./...

profile-guest: wasm
	$(TEST_ENV) $(GO) test ./filter -run '^$$' -bench '^Benchmark(Gate1|Full)$$' -benchtime 5000x

PKG   ?= ./shared/llm
BENCH ?= .
bench-guest:
	@mkdir -p build
	$(GO) build -o build/wasmexec ./internal/wasmexec
	$(WASM_ENV) $(GO) test -exec $(abspath build/wasmexec) -run '^$$' -bench '$(BENCH)' -benchmem $(PKG)

clean:
	rm -rf build bin
