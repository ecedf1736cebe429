# mvq — materialized-view refreshes as asynchronous jobs.
# Every Go command needs the duckdb_arrow tag (DuckDB's Arrow interface).
export GOFLAGS := -buildvcs=false -tags=duckdb_arrow

GO      ?= go
BIN     ?= bin
PKGS    := ./...
TESTTIMEOUT ?= 20m

# --version of every binary prints these (internal/version; a build
# without them falls back to Go's build info).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/mvq-dev/mvq/internal/version.Version=$(VERSION) \
	-X github.com/mvq-dev/mvq/internal/version.Commit=$(COMMIT)

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: tools
tools: ## Check that the tools the build and tests need are installed
	@command -v $(GO) >/dev/null || { echo "go not found: install Go 1.26+ (https://go.dev/dl)"; exit 1; }
	@command -v gcc >/dev/null || { echo "gcc not found: DuckDB needs cgo (apt-get install gcc)"; exit 1; }
	@command -v redis-server >/dev/null || { echo "redis-server not found: the tests start their own (apt-get install redis-server)"; exit 1; }
	@command -v redis-cli >/dev/null || { echo "redis-cli not found: the Redis Cluster test needs it (apt-get install redis-tools)"; exit 1; }

# Binaries are stripped of debug info (a third of their size) unless
# DEBUG=1. bin/api and bin/worker are hard links to bin/mvq, which runs as
# the service its name says: one link of DuckDB instead of three. go build
# -v names each package it compiles, so a first build shows its progress.
DEBUG   ?=
STRIP   := $(if $(DEBUG),,-s -w)

.PHONY: build
build: ## Build bin/mvq and link bin/api and bin/worker to it (stripped; DEBUG=1 keeps debug info)
	@command -v $(GO) >/dev/null || { echo "go not found: install Go 1.26+"; exit 1; }
	@echo "building $(BIN)/mvq (a first build compiles DuckDB: a few minutes; later ones take seconds)"
	@bash -o pipefail -c "$(GO) build -v -ldflags '$(STRIP) $(LDFLAGS)' -o $(BIN)/mvq ./cmd/mvq 2>&1 | \
		awk '/^[a-z0-9.]+\// { n++; printf \"\r  compiled %4d packages  %-60.60s\", n, \$$0; fflush(); next } { print }; END { if (n) print \"\" }'"
	@ln -f $(BIN)/mvq $(BIN)/api && ln -f $(BIN)/mvq $(BIN)/worker
	@ls -lh $(BIN)/mvq | awk '{ print "built $(BIN)/mvq (" $$5 "), $(BIN)/api and $(BIN)/worker (links to it)" }'

.PHONY: proto
proto: ## Regenerate the Go code of the Lance protobuf definitions (needs protoc and protoc-gen-go)
	lance/proto/gen.sh

.PHONY: version
version: ## Print the version and commit make build stamps into the binaries
	@echo "$(VERSION) (commit $(COMMIT))"

.PHONY: run
run: build ## Run `mvq dev`: API + worker + a local Redis, warehouse and job records in ./warehouse
	$(BIN)/mvq dev

.PHONY: demo
demo: build ## Create a text table and a chunker view, refresh it, print the rows (on the running make run, else on ./warehouse)
	$(BIN)/mvq demo

# The Lance tests drive LanceDB (lance/oracle, pinned by its package-lock.json)
# with node. npm ci runs only when the lock file is newer than the install
# (npm writes node_modules/.package-lock.json on each install).
ORACLE := lance/oracle

.PHONY: oracle
oracle: ## Install the LanceDB test oracle with npm ci in lance/oracle (when node and npm are present)
	@if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then \
		$(MAKE) -s --no-print-directory $(ORACLE)/node_modules/.package-lock.json; \
	else \
		echo "node/npm not found: the Lance tests that need LanceDB skip (under CI=true they fail)"; \
	fi

$(ORACLE)/node_modules/.package-lock.json: $(ORACLE)/package.json $(ORACLE)/package-lock.json
	@echo "npm ci in $(ORACLE)"
	cd $(ORACLE) && npm ci --no-audit --no-fund
	@touch $@

.PHONY: test
test: tools oracle ## Run every test (starts its own redis-server on a free port; installs the LanceDB oracle)
	$(GO) test -count=1 -timeout $(TESTTIMEOUT) $(PKGS)

# SeaweedFS, the S3 server of make test-s3 (Apache-2.0), built once from
# the module proxy into a cache that later runs and fresh clones reuse. Its
# go.mod has replace directives, so it is built inside its module directory
# (go install pkg@version refuses those). GOFLAGS is cleared of our tags.
WEED_VERSION := v0.0.0-20261109003541-7506e5f91cd6
WEED_CACHE   ?= $(HOME)/.cache/mvq
WEED         := $(WEED_CACHE)/weed-$(WEED_VERSION)/weed

.PHONY: weed
weed: $(WEED) ## Build SeaweedFS's weed once into ~/.cache/mvq (first time: see README)

$(WEED):
	@mkdir -p $(dir $@)
	@echo "building SeaweedFS weed $(WEED_VERSION) into $(dir $@) (first time only)"
	cd $(WEED_CACHE) && dir=$$(GOFLAGS= $(GO) mod download -json github.com/seaweedfs/seaweedfs@$(WEED_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$$/\1/p') && \
		test -n "$$dir" && cd "$$dir" && GOFLAGS=-buildvcs=false $(GO) build -trimpath -o $@.tmp ./weed && mv $@.tmp $@

.PHONY: test-s3
test-s3: tools weed ## Run the table and refresh suites, the commit race and the S3 service tests on a local SeaweedFS S3
	MVQ_TEST_S3=1 MVQ_TEST_WEED=$(WEED) $(GO) test -count=1 -timeout $(TESTTIMEOUT) ./table ./refresh
	MVQ_TEST_S3=1 MVQ_TEST_WEED=$(WEED) $(GO) test -count=1 -timeout $(TESTTIMEOUT) -run 'S3' ./service

.PHONY: bench
bench: oracle ## Run the benchmarks; each prints ratios against a baseline from the same run (MVQ_BENCH_DOCS=100000, MVQ_BENCH_ROWS=1000000)
	$(GO) test -run '^$$' -bench . -benchtime 2x -timeout 60m ./table ./refresh
	$(GO) test -run '^$$' -bench . -benchtime 5x -timeout 30m ./vector
	@# Lance files: the Go reader vs LanceDB's toArrow() (scan, 2-column projection,
	@# take of 1,000 rows; MVQ_BENCH_LANCE_ROWS, the issue's size is 1000000), the
	@# 2.1 writer vs mvq's Parquet writer, and file size vs LanceDB's.
	$(GO) test -run '^$$' -bench 'Read21|Write21VsParquet|Read20|Take20|Write20' -benchtime 1x -timeout 60m ./lance/file
	$(GO) test -run 'TestWriter21SizeVsLanceDB' -count=1 -v -timeout 10m ./lance/file
	@# Indexes: scalar filter, IVF vs exact (recall), full text, view refresh cost
	@# (MVQ_BENCH_INDEX_ROWS, MVQ_BENCH_VECTORS, MVQ_BENCH_FTS_DOCS).
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 30m ./index
	$(GO) test -run '^$$' -bench 'RefreshOrchestrated|TracingOverhead|HTTPRuntimeWorkers' -benchtime 3x -timeout 60m ./service
	@# Lance tables: LanceDB's adds through the REST namespace, version/create
	@# p50/p90/p99 from the API's histogram (MVQ_BENCH_ADDS=200; target p50 <= 5 ms),
	@# and a worker process's peak RSS over a chunker refresh of 40k documents
	@# and of 4x that (MVQ_BENCH_RSS_DOCS=40000; targets <= 300 MB, ratio <= 1.2),
	@# and the incremental refresh after LanceDB appends 1% to a table of
	@# MVQ_BENCH_ROWS (1M) rows against the full one (target <= 0.05).
	$(GO) test -run '^$$' -bench 'VersionCreateLanceDB|WorkerPeakRSS|IncrementalAfterLanceDBAppend' -benchtime 1x -timeout 30m -v ./service
	@# The control plane: accept, job status, fixed cost, small jobs, cancel,
	@# and its Redis side alone (each logs its ratios with -v); the accept
	@# against the gin + asynq.Enqueue peer and the floors of mvq's writes
	@# (targets >= 0.8x the peer's rate, p99 <= 1.2x).
	$(GO) test -run '^$$' -bench 'APIControlPlane|JobFixedCost|SmallJobs' -benchtime 1x -timeout 30m -v ./service
	$(GO) test -run '^$$' -bench 'AcceptVsPeer' -benchtime 2x -timeout 10m -v ./service
	$(GO) test -run '^$$' -bench 'CancelLatency|ControlPlaneRedis' -benchtime 1x -timeout 10m -v ./jobs
	@# Commit to auto-refreshed view visible, p50/p99 over 50 commits (MVQ_BENCH_AUTO_COMMITS).
	$(GO) test -run '^$$' -bench AutoRefreshLatency -benchtime 1x -timeout 10m -v ./jobs

.PHONY: bench-scale
bench-scale: ## One large chunker refresh with 1, 2, 4, 8, 16 worker processes, one core each (a 16-core machine; ~15 min; MVQ_SCALE_WORKERS, MVQ_SCALE_DOCS)
	MVQ_SCALE_WORKERS=$${MVQ_SCALE_WORKERS:-1,2,4,8,16} MVQ_SCALE_DOCS=$${MVQ_SCALE_DOCS:-400000} \
		$(GO) test -run '^$$' -bench ScaleWorkers -benchtime 1x -timeout 15m -v ./service

.PHONY: lint
lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

# Every fuzz target over input from outside: package:target.
FUZZ_TARGETS := table:FuzzParseID table:FuzzDecodeManifest arrowjson:FuzzDecodeRows \
	arrowjson:FuzzInferRows arrowjson:FuzzReadIPC internal/strictjson:FuzzCheckJSON \
	lance/dataset:FuzzManifest lance/dataset:FuzzTransaction lance/dataset:FuzzDeletionArrow \
	lance/dataset:FuzzDeletionBitmap lance/file:FuzzOpen lance/file:FuzzDecodeMiniblock \
	lance/file:FuzzBitunpack lance/file:FuzzLevels lance/file:FuzzFullZip lance/file:FuzzDecodePage20 \
	lance/file:FuzzDecodeListPage20 lance/file:FuzzRead20File lance/internal/fastlanes:FuzzUnpack \
	lance/internal/fsst:FuzzFSST lance/internal/fsst:FuzzCut
FUZZTIME ?= 20s
# How long the fuzzer may spend shrinking each new interesting input (Go's
# default is 60s per input, which alone outlasts a short FUZZTIME and fails
# the run with "context deadline exceeded"); a crash is still reported.
FUZZMINIMIZETIME ?= 2s

# Go 1.26's fuzz coordinator can fail a run with a bare "context deadline
# exceeded" when -fuzztime ends while a worker is busy (golang/go#75804,
# fixed in Go 1.27): such a run that wrote no failing input under
# testdata/fuzz is reported and not counted as a failure; any other
# failure, or a new failing input, still fails.
.PHONY: fuzz
fuzz: ## Fuzz every decoder of outside input for FUZZTIME each (20s)
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; dir=$$pkg/testdata/fuzz/$$name; \
		echo "fuzz $$t"; \
		before=$$(ls $$dir 2>/dev/null || true); \
		if out=$$($(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) ./$$pkg 2>&1); then \
			echo "$$out" | tail -n 2; \
		else \
			echo "$$out"; \
			after=$$(ls $$dir 2>/dev/null || true); \
			if [ "$$before" = "$$after" ] && echo "$$out" | grep -q '^    context deadline exceeded$$'; then \
				echo "fuzz $$t: ended by the Go fuzz coordinator's deadline race (golang/go#75804), no failing input written: not a failure"; \
			else \
				exit 1; \
			fi; \
		fi; \
	done

.PHONY: fuzz-ci
fuzz-ci: ## The fuzz targets for 10s each, as CI runs them after make test
	@$(MAKE) --no-print-directory fuzz FUZZTIME=10s

.PHONY: clean
clean: ## Remove build outputs (never the warehouse: see clean-warehouse)
	rm -rf $(BIN)

.PHONY: clean-warehouse
clean-warehouse: ## Delete ./warehouse, your local tables, views and dev job records (asks first; CONFIRM=yes skips)
	@if [ ! -e warehouse ]; then echo "no ./warehouse"; exit 0; fi; \
	if [ "$(CONFIRM)" != yes ]; then \
		printf 'Delete ./warehouse (%s) with every table, view and job record in it? [y/N] ' "$$(du -sh warehouse | cut -f1)"; \
		read ans; case "$$ans" in y|Y|yes) ;; *) echo "kept ./warehouse"; exit 1;; esac; \
	fi; \
	rm -rf warehouse && echo "deleted ./warehouse"

.PHONY: soak
soak: ## Minutes of concurrent refreshes, inserts and deletes through two APIs and two workers with SIGKILLs and a Redis restart (MVQ_SOAK_DURATION=3m)
	$(GO) test -count=1 -tags 'duckdb_arrow soak' -run TestSoak -v -timeout 40m ./internal/soak
