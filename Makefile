# Tollgate build. `make test` is the test command the README and CI use.
SHELL := /bin/bash
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)

.PHONY: chaos chaos-soak all build axe mailpit test test-go fmt-check vet buf-lint generate check-generated tools jaeger helm chart-check ci fuzz bench bench-peers bench-replicas bench-go

all: build

build:
	go build ./...

## test: the whole suite: the main module's tests with the race detector
## (test-go), then the deployment artifacts' (chart-check: the chart and its
## Go test; image-test: the image read back and run), each a module of its own.
test: test-go chart-check image-test

## test-go: the main module's tests, with the race detector. Without a Jaeger
## binary (bin/jaeger or $TOLLGATE_JAEGER) the tracing tests skip: the last
## line says so and how to run them; the exit status is go test's.
test-go: axe
	@status=0; go test -race -count=1 -timeout 25m ./... || status=$$?; \
	go test -race -count=1 -tags faults ./internal/faults/ || status=$$?; \
	if [ -z "$$TOLLGATE_MAILPIT" ] && [ ! -x "$(BIN)/mailpit" ]; then \
		echo "make test: the email tests (real Mailpit, internal/mailpittest) were SKIPPED: no bin/mailpit and no \$$TOLLGATE_MAILPIT; 'make mailpit' once (~3 min) builds it."; \
	fi; \
	if [ -z "$$TOLLGATE_JAEGER" ] && [ ! -x "$(BIN)/jaeger" ]; then \
		echo "make test: the tracing tests (real Jaeger, internal/jaegertest) were SKIPPED: no bin/jaeger and no \$$TOLLGATE_JAEGER."; \
		echo "make test: to run them, 'make jaeger' once (~5 min, ~3 GB of Go cache) or set TOLLGATE_JAEGER=/path/to/jaeger, then make test again."; \
	fi; exit $$status

## axe: axe-core for the browser tests (internal/browsertest, the web
## inbox's accessibility check), pinned in tools/axe; Chromium itself is
## Debian's (apt-get install chromium; .ci/run installs it).
axe: tools/axe/node_modules/axe-core/axe.min.js

tools/axe/node_modules/axe-core/axe.min.js: tools/axe/package.json tools/axe/package-lock.json
	npm ci --prefix tools/axe --no-audit --no-fund
	@touch $@

## tools: build buf and the protoc plugins pinned in tools/go.mod into bin/.
tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc

$(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc: tools/go.mod tools/go.sum
	cd tools && GOBIN=$(BIN) go install \
		github.com/bufbuild/buf/cmd/buf \
		google.golang.org/protobuf/cmd/protoc-gen-go \
		google.golang.org/grpc/cmd/protoc-gen-go-grpc

## jaeger: build bin/jaeger (Jaeger v2.13, for internal/jaegertest) from the
## module of its own in tools/jaeger; only when it is missing or
## tools/jaeger/go.sum changed. Cold: ~5 min on 2 cores and ~3 GB of cache.
jaeger: $(BIN)/jaeger

$(BIN)/jaeger: tools/jaeger/go.mod tools/jaeger/go.sum
	cd tools/jaeger && go build -o $(BIN)/jaeger github.com/jaegertracing/jaeger/cmd/jaeger
	@touch $@

## mailpit: build bin/mailpit (Mailpit v1.33.1, a real SMTP server for
## internal/mailpittest) from the module of its own in tools/mailpit; only
## when it is missing or tools/mailpit/go.sum changed. Cold: ~3 min on 2 cores.
mailpit: $(BIN)/mailpit

$(BIN)/mailpit: tools/mailpit/go.mod tools/mailpit/go.sum
	cd tools/mailpit && go build -o $(BIN)/mailpit github.com/axllent/mailpit
	@touch $@

## helm: build bin/helm (Helm v3.22, pinned in tools/helm, a module of its
## own) for chart-check. Built from source, Helm believes it targets
## Kubernetes 1.20 unless told, so its default capabilities (and lint's
## deprecation rules) are set to the Kubernetes release its client libraries
## are: 1.37. Cold: ~3 min on 2 cores.
HELM_LDFLAGS := -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37 \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37
helm: $(BIN)/helm

$(BIN)/helm: tools/helm/go.mod tools/helm/go.sum
	cd tools/helm && CGO_ENABLED=0 go build -ldflags '$(HELM_LDFLAGS)' -o $(BIN)/helm helm.sh/helm/v3/cmd/helm
	@touch $@

## chart-check: helm lint and helm template of deploy/helm/tollgate for each
## value set in its ci/ folder (what CI renders), then the chart's Go test
## (deploy/helm/test, a module of its own: the rendered documents decoded
## strictly into Kubernetes types, and the rendered control plane started
## here against a real redis-server). Helm runs with its home in a temp dir.
## deploy/helm/test requires the main module through a replace: after a change
## to the main go.mod, run `go mod tidy` there too (go test says so otherwise).
CHART := deploy/helm/tollgate
chart-check: helm
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	export HELM_CACHE_HOME=$$tmp/cache HELM_CONFIG_HOME=$$tmp/config HELM_DATA_HOME=$$tmp/data; \
	for v in $(CHART)/ci/*.yaml; do \
		echo "helm lint + template: $$v"; \
		helm lint --strict $(CHART) -f $$v || exit 1; \
		helm template t $(CHART) -f $$v > $$tmp/out.yaml || exit 1; \
	done
	cd deploy/helm/test && TOLLGATE_HELM=$(BIN)/helm go test -race -count=1 ./...

## generate: regenerate gen/ from proto/ (the result is committed).
generate: tools
	buf generate

## check-generated: fail if regenerating changes the committed tree.
check-generated: generate
	@if [ -n "$$(git status --porcelain -- gen proto)" ]; then \
		echo "gen/ is stale: run 'make generate' and commit the result"; \
		git status --porcelain -- gen proto; git diff --stat -- gen; exit 1; fi

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	go vet ./...
	go vet -tags faults ./internal/faults/

buf-lint: tools
	buf lint

## ci: everything .ci/run checks.
ci: fmt-check vet buf-lint check-generated test

## fuzz: run the compiler fuzzer for FUZZTIME (default 60s).
FUZZTIME ?= 60s
fuzz:
	go test -run=NONE -fuzz=FuzzCompile -fuzztime=$(FUZZTIME) ./pkg/compiler

## chaos: the fault suite (test/e2e TestChaos, RELIABILITY.md) on one
## schedule: SEED (default: from the clock; a failure prints its seed and this
## command to replay it) and DURATION of faults (default 5m; `make test` runs
## 45s). The figures are appended to $(CHAOS_REPORT) as one JSON line. With
## RACE=1 the processes have the race detector (slower: fewer operations).
SEED ?=
DURATION ?= 5m
CHAOS_REPORT ?= $(BIN)/chaos/report.jsonl
RACE ?=
chaos:
	@mkdir -p $(dir $(CHAOS_REPORT))
	cd test/e2e && CHAOS_SEED=$(SEED) CHAOS_DURATION=$(DURATION) CHAOS_REPORT=$(CHAOS_REPORT) \
		go test $(if $(RACE),-race) -count=1 -timeout 0 -run '^TestChaos$$' -v .

## chaos-soak: schedules of SOAK_DURATION (default 3m) with fresh seeds, one after
## another, until TOTAL (default 30m) has passed or one fails (its seed and
## replay command are printed); every schedule's figures in $(CHAOS_REPORT).
TOTAL ?= 30m
SOAK_DURATION ?= 3m
chaos-soak:
	@end=$$(( $$(date +%s) + $$(echo $(TOTAL) | sed 's/m$$/*60/; s/s$$//; s/h$$/*3600/' | bc) )); \
	while [ $$(date +%s) -lt $$end ]; do \
		seed=$$(od -An -N6 -tu8 /dev/urandom | tr -d ' '); \
		$(MAKE) --no-print-directory chaos SEED=$$seed DURATION=$(SOAK_DURATION) || { echo "chaos-soak: seed $$seed failed: make chaos SEED=$$seed DURATION=$(SOAK_DURATION)"; exit 1; }; \
	done

## bench: every DESIGN.md §12 figure (cmd/tollgate-bench: its own redis-server,
## control plane and executors) against its goal; the table on stdout and in
## $(BENCH_OUT)/tollgate.md, JSON in $(BENCH_OUT)/tollgate.json. A few minutes;
## take figures on a quiet machine (`uptime`). More: BENCH_FLAGS='-parked
## 1000000 -fsync always -cpuprofile cpu.out', or `go run ./cmd/tollgate-bench -help`.
## Not part of `make test` or `make ci`.
BENCH_OUT ?= bin/bench
BENCH_FLAGS ?=
bench:
	@mkdir -p $(BENCH_OUT)
	go run ./cmd/tollgate-bench -json $(BENCH_OUT)/tollgate.json -md $(BENCH_OUT)/tollgate.md $(BENCH_FLAGS)

## bench-peers: the same, then the peers on the same workloads, each a module
## of its own run with `go run -C`: Temporal's own server on PostgreSQL, 4
## history shards (bench/peers/temporal; first build 5-30 min) and River
## (bench/peers/river; first build ~1 min), both on the PostgreSQL at
## 127.0.0.1:5432 (-pg), each creating and dropping databases of its own; then
## one side-by-side table with the ratios: $(BENCH_OUT)/peers.md and peers.json.
## Reuse a saved peer report with BENCH_FLAGS='-temporal-json F' or '-river-json F'.
## River runs with its fetch cooldown at its 1 ms minimum (RIVER_FLAGS): it is
## there as the floor a durable queue on PostgreSQL reaches, and at its 100 ms
## default its latencies are that timer. Temporal keeps its defaults.
## TRACE_FLAGS adds the tracing cost at a sample of 1 and of 0.1 (a real
## Jaeger, make jaeger), so the run prints every figure issue 22 set.
RIVER_FLAGS ?= -fetch-cooldown 1ms
TRACE_FLAGS ?= -trace -trace-sample 1,0.1
bench-peers:
	@mkdir -p $(BENCH_OUT)
	go run ./cmd/tollgate-bench -peers -river-flags '$(RIVER_FLAGS)' $(TRACE_FLAGS) -json $(BENCH_OUT)/peers.json -md $(BENCH_OUT)/peers.md $(BENCH_FLAGS)

## bench-replicas: the same workloads with REPLICAS (default 3) control planes
## on the one Redis, an executor on each, clients spread over them round-robin
## (a run approved through another replica than it started on):
## $(BENCH_OUT)/replicas.md and replicas.json. Compare with `make bench` taken in
## the same hour (BENCHMARKS.md, issue 15). Same as `go run ./cmd/tollgate-bench -replicas 3`.
REPLICAS ?= 3
bench-replicas:
	@mkdir -p $(BENCH_OUT)
	go run ./cmd/tollgate-bench -replicas $(REPLICAS) -json $(BENCH_OUT)/replicas.json -md $(BENCH_OUT)/replicas.md $(BENCH_FLAGS)

## bench-go: the go test benchmarks (pure cores, Redis store, end to end).
bench-go:
	go test -run=NONE -bench=. -benchmem ./pkg/...
	go test -run '^$$' -bench 'Commit$$|Inbox' -benchtime 3000x ./internal/store/redisstore
	go test -run '^$$' -bench 'Memory' -benchtime 1x ./internal/store/redisstore
	go test -run '^$$' -bench 'ThreeStep|Fan' -benchtime 100x ./test/e2e
	go test -run '^$$' -bench 'Sustained' -benchtime 6400x ./test/e2e
	go test -run '^$$' -bench 'MCPGateway' -benchtime 2000x ./test/e2e

## image: the container image (controlplane, executor, approvectl; static, on
## an empty base, user 65532:65532, no shell) built without Docker by
## tools/image (its own module): an OCI layout in bin/image/oci and a `docker
## load`-able bin/image/tollgate.tar, named $(IMAGE_TAG) (default tollgate:dev,
## for linux/$(IMAGE_ARCH)); prints the image digest. Reproducible: the same
## commit gives the same digest (mtimes: $$SOURCE_DATE_EPOCH, else 1970). The
## Dockerfile builds the same files where Docker is at hand.
IMAGE_TAG ?= tollgate:dev
IMAGE_VERSION ?= $(lastword $(subst :, ,$(IMAGE_TAG)))
IMAGE_ARCH ?= amd64
IMAGE_DIR := $(BIN)/image
.PHONY: image image-test
image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) go build -trimpath -ldflags '-s -w' \
		-o $(IMAGE_DIR)/rootfs-bin/ ./cmd/controlplane ./cmd/executor ./cmd/approvectl
	rm -rf $(IMAGE_DIR)/oci
	cd tools/image && go run . -bin $(IMAGE_DIR)/rootfs-bin -repo $(CURDIR) -arch $(IMAGE_ARCH) \
		-tag $(IMAGE_TAG) -version $(IMAGE_VERSION) -revision "$$(git rev-parse HEAD)" \
		-oci $(IMAGE_DIR)/oci -tar $(IMAGE_DIR)/tollgate.tar

## image-test: tools/image's tests: build the binaries and the image, read it
## back (config, files, static ELF, licences, same digest twice, tarball) and
## run each binary's --help from the unpacked image (as 65532 via chroot when root).
image-test:
	cd tools/image && go test -count=1 ./...
