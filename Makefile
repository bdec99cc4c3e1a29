# adoption: the project's vocabulary. `make demo` and `make test` are the two
# commands a new user runs (as root: the sandbox creates network namespaces).

SHELL         := /bin/bash
GO            ?= go
CACHE         ?= $(HOME)/.cache/adoption
TEMPORAL_CLI_VERSION := v1.5.1
TEMPORAL      ?= $(CACHE)/bin/temporal
STATE         := .adoption
DEV_DB        := $(STATE)/temporal.db
DEV_PORT      ?= 7233
UI_PORT       ?= 8233
CODEC_PORT    ?= 8234
# The dev server's codec key: payloads are encrypted with it and plans'
# digests keyed by it; the codec server decodes for the Web UI.
CODEC_KEY     := $(STATE)/codec.key
SEARCH_ATTRS  := --search-attribute AdoptionNode=Keyword --search-attribute AdoptionPhase=Keyword --search-attribute AdoptionAttention=Keyword
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
WORKFLOWCHECK := go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0
TEST_TIMEOUT  ?= 40m
FUZZTIME      ?= 2m
FUZZMINTIME   ?= 30s

# The version stamped into every binary (adopt --version, adopt-worker
# --version, the start log, adoption_build_info, the orchestrator's build
# ID): git describe, else the commit; VERSION=... overrides.
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-unknown)
COMMIT        ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS       := -X adoption/buildinfo.version=$(VERSION) -X adoption/buildinfo.commit=$(COMMIT)

# make install: binaries, systemd units and the example configuration.
PREFIX        ?= /usr/local
DESTDIR       ?=
BINDIR        ?= $(PREFIX)/bin
UNITDIR       ?= $(PREFIX)/lib/systemd/system
MANDIR        ?= $(PREFIX)/share/man
SYSCONFDIR    ?= /etc
STATEDIR      ?= /var/lib/adoption

TEMPORAL_STATIC ?= $(CACHE)/static/bin/temporal
COMPOSE       ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)

# nft, iptables, ip and ufw live in /usr/sbin, which a login shell's PATH
# may lack (su without -): the tests and deps.sh look them up on PATH.
export PATH := $(PATH):/usr/sbin:/sbin

export ADOPT_TEMPORAL_BIN := $(TEMPORAL)
export ADOPT_TEMPORAL_STATIC_BIN := $(TEMPORAL_STATIC)

.PHONY: build deb deps test unit lint install bench dev-server dev-server-stop codec-server temporal-cli temporal-cli-static \
	compose-images compose-up compose-down demo demo-clean clean fuzz fuzz-short chaos cluster cluster-stop e2e-cluster

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/adopt ./starter
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/adopt-worker ./worker
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/adopt-sandbox ./sandbox/cmd/adopt-sandbox

# The agent, the orchestrator and the flip watchdog as systemd units (see
# deploy/systemd/ for what each may do and why), with the binaries they run
# and config/node.example.yaml beside where node.yaml goes. Units are written with
# the final paths (without DESTDIR); `systemctl daemon-reload` and
# `systemctl enable --now adopt-agent adopt-watchdog` are left to the operator.
install: build
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/adoption
	install -m 0755 bin/adopt bin/adopt-worker $(DESTDIR)$(BINDIR)/
	for u in deploy/systemd/*.service; do \
		sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@STATEDIR@|$(STATEDIR)|g' $$u \
			> $(DESTDIR)$(UNITDIR)/$$(basename $$u) && chmod 0644 $(DESTDIR)$(UNITDIR)/$$(basename $$u) || exit 1; \
	done
	install -m 0644 config/node.example.yaml $(DESTDIR)$(SYSCONFDIR)/adoption/node.example.yaml
	bin/adopt man $(DESTDIR)$(MANDIR)/man1 && bin/adopt-worker man $(DESTDIR)$(MANDIR)/man1

# Debian packages of the stamped binaries, built by nfpm (built from its
# pinned module) into $(DEBDIR): adopt, adopt-worker,
# adopt-agent (agent and watchdog units, the node example),
# adopt-orchestrator (deploy/nfpm/). Their maintainer scripts start nothing
# that has no configuration and never stop the watchdog (deploy/debian/).
DEBDIR        ?= dist
NFPM          := github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.48.0
deb: build
	NFPM=$(NFPM) GO=$(GO) ./scripts/deb.sh $(DEBDIR) $(VERSION)

# The pinned Temporal CLI (dev server 1.29.1 with its Web UI), built from the
# Go module proxy into a cache outside the work tree: ~7 minutes the first
# time, instant after.
temporal-cli: $(TEMPORAL)
$(TEMPORAL):
	mkdir -p $(dir $(TEMPORAL))
	GOBIN=$(dir $(TEMPORAL)) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

# The same pinned CLI without cgo, for the FROM scratch image of
# docker-compose.yml (no base image can be pulled here).
temporal-cli-static: $(TEMPORAL_STATIC)
$(TEMPORAL_STATIC):
	mkdir -p $(dir $(TEMPORAL_STATIC))
	CGO_ENABLED=0 GOBIN=$(dir $(TEMPORAL_STATIC)) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

# Images for docker-compose.yml, built locally (no registry needed), and the
# stack's codec key (.adoption/codec.key, 0600, generated once, ignored by git)
# unless ADOPTION_CODEC_KEY names another.
compose-images: temporal-cli-static $(if $(ADOPTION_CODEC_KEY),,$(CODEC_KEY))
	cp $(TEMPORAL_STATIC) docker/temporal/temporal
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o docker/worker/adopt-worker ./worker
	cp /etc/ssl/certs/ca-certificates.crt docker/worker/ca-certificates.crt
	$(COMPOSE) build

compose-up: compose-images
	$(COMPOSE) -p adoption up -d

compose-down:
	$(COMPOSE) -p adoption down

# What make test needs on the machine (nft, iptables-nft, ip, ufw, chromium,
# docker-compose, systemd-analyze, promtool, lintian, dpkg): as root on
# Debian, installed with apt;
# elsewhere, named with the command that installs them.
deps:
	@./scripts/deps.sh

# Every test: unit, root (network namespaces, real nftables and packets),
# Docker, and end to end against a real dev server the tests start themselves.
# It sets itself up (deps, the pinned Temporal CLI) and never skips a tier:
# ADOPT_UNIT_ONLY is removed from the tests' environment, and a test whose
# tool is missing fails naming it. Root is required (network namespaces).
# Failpoints exist only in builds with -tags failpoints: the end-to-end
# tests build such a worker themselves (tests/harness_test.go); the
# failpoint package's own tests run once with the tag.
test: deps
	@[ "$$(id -u)" = 0 ] || { echo "make test needs root (it creates network namespaces, nftables rulesets, a dockerd); run it as root, or \`make unit\` for the tests that need neither root nor Temporal" >&2; exit 1; }
	@$(MAKE) --no-print-directory build temporal-cli temporal-cli-static
	env -u ADOPT_UNIT_ONLY $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	env -u ADOPT_UNIT_ONLY $(GO) test -count=1 -tags failpoints ./failpoint/
	@$(MAKE) --no-print-directory fuzz-short

# Every failpoint, a dev server restart, every outside interference, in
# full (make test runs a reduced draw, its seed logged: ADOPT_CHAOS_SEED);
# the flip's watchdog with Temporal down and with a failing first revert.
chaos: build temporal-cli
	ADOPT_CHAOS=full $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run 'TestChaos|TestCutoverSurvivesWorkerKill|TestInterference|TestFlipWatchdog' ./tests/

# Fuzzing: each target for $(FUZZTIME) (a duration, or a count of runs
# such as 6000x); a finding is written to
# <pkg>/testdata/fuzz/<Target>/ and replayed by every later go test.
# Then the flip's differential tests against the kernel (native nftables,
# and ufw/Docker through iptables-nft), each over $(FLIP_FUZZ_RULESETS)
# generated rulesets (root; make test runs 6 of each as part of ./..., so
# fuzz-short skips them).
FLIP_FUZZ_RULESETS ?= 500
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzLoadConfig$$'      -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) ./config
	$(GO) test -run '^$$' -fuzz '^FuzzParsePort$$'       -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) ./config
	$(GO) test -run '^$$' -fuzz '^FuzzValidName$$'       -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) ./config
	$(GO) test -run '^$$' -fuzz '^FuzzOpenPorts$$'       -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) ./firewall/eval
	$(GO) test -run '^$$' -fuzz '^FuzzOpenPortsSimple$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) ./firewall/eval
	@if [ "$(FLIP_FUZZ_RULESETS)" != 0 ]; then \
		ADOPT_FLIP_FUZZ_RULESETS=$(FLIP_FUZZ_RULESETS) $(GO) test -count=1 -timeout 6h -v -run '^TestKernelFlipDifferentialFuzz(Iptables)?$$' ./firewall/flip; fi

# The short form make test runs: 6,000 runs a target (2 to 14 s here). A
# count, not a duration: Go 1.26's fuzz coordinator can fail a target with a
# bare "context deadline exceeded" when a duration ends while a worker is
# mid-run (golang/go#75804, fixed in Go 1.27); a count has no deadline.
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=6000x FUZZMINTIME=5s FLIP_FUZZ_RULESETS=0

# Unit tests only: no root, no Temporal, no Docker needed.
unit:
	ADOPT_UNIT_ONLY=1 $(GO) test -count=1 ./...
	ADOPT_UNIT_ONLY=1 $(GO) test -count=1 -tags failpoints ./failpoint/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags failpoints ./failpoint/ ./worker/ ./tests/
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(WORKFLOWCHECK) ./workflows/...

# Figures, measured side by side in one run (never timed assertions in
# tests), as root: marked rules against nft/iptables/ufw per rule, the probe
# of a control-node-shaped node, cutover unavailability against a naive
# swap, connections lost during the flip against ufw disable + nft -f, and
# 1,000 simulated nodes on one dev server. One table, also written to
# bench/results/bench-<date>.json; 4-8 minutes; -skip-* flags per part.
bench: temporal-cli
	$(GO) run ./bench $(BENCH_FLAGS)

# A detached server must not keep descriptors make inherited (the lock of a
# `flock LOCK make demo`) for as long as it runs.
CLOSE_FDS := 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-

# The demo's codec key: 32 random bytes, 0600, made once.
$(CODEC_KEY):
	@mkdir -p $(STATE)
	@(umask 077 && head -c 32 /dev/urandom > $@.tmp && mv $@.tmp $@)
	@echo "codec key written to $@ (0600): payloads and plan digests are keyed by it"

# The codec server the Web UI decodes payloads through (loopback only).
# Idempotent: one already answering is left alone.
codec-server: build $(CODEC_KEY)
	@if curl -s -o /dev/null -X OPTIONS -H 'Origin: http://127.0.0.1:$(UI_PORT)' http://127.0.0.1:$(CODEC_PORT)/decode 2>/dev/null; then \
		echo "codec server already running on 127.0.0.1:$(CODEC_PORT)"; \
	else \
		ADOPT_TEMPORAL_CODEC_KEY_FILE=$(CURDIR)/$(CODEC_KEY) setsid nohup bin/adopt-worker codec-server \
			--listen 127.0.0.1:$(CODEC_PORT) --ui-origin http://127.0.0.1:$(UI_PORT),http://localhost:$(UI_PORT) \
			> $(STATE)/codec-server.log 2>&1 < /dev/null $(CLOSE_FDS) & echo $$! > $(STATE)/codec-server.pid; \
		for i in $$(seq 1 40); do \
			curl -s -o /dev/null -X OPTIONS -H 'Origin: http://127.0.0.1:$(UI_PORT)' http://127.0.0.1:$(CODEC_PORT)/decode && break; sleep 0.25; \
		done; \
		curl -s -o /dev/null -X OPTIONS -H 'Origin: http://127.0.0.1:$(UI_PORT)' http://127.0.0.1:$(CODEC_PORT)/decode || { cat $(STATE)/codec-server.log; exit 1; }; \
		echo "codec server on 127.0.0.1:$(CODEC_PORT) (the Web UI decodes payloads through it)"; \
	fi

# A local dev server for the demo and for operators trying things: database
# under .adoption/, search attributes registered, Web UI on :$(UI_PORT)
# decoding payloads through the codec server. Idempotent: a server already
# answering is left alone.
dev-server: temporal-cli codec-server
	@mkdir -p $(STATE)
	@if $(TEMPORAL) operator cluster health --address 127.0.0.1:$(DEV_PORT) >/dev/null 2>&1; then \
		echo "dev server already running on 127.0.0.1:$(DEV_PORT)"; \
	else \
		setsid nohup $(TEMPORAL) server start-dev --db-filename $(DEV_DB) --ip 127.0.0.1 \
			--port $(DEV_PORT) --ui-port $(UI_PORT) --ui-codec-endpoint http://127.0.0.1:$(CODEC_PORT) $(SEARCH_ATTRS) \
			> $(STATE)/dev-server.log 2>&1 < /dev/null $(CLOSE_FDS) & echo $$! > $(STATE)/dev-server.pid; \
		for i in $$(seq 1 60); do \
			$(TEMPORAL) operator cluster health --address 127.0.0.1:$(DEV_PORT) >/dev/null 2>&1 && break; sleep 0.5; \
		done; \
		$(TEMPORAL) operator cluster health --address 127.0.0.1:$(DEV_PORT) >/dev/null || { cat $(STATE)/dev-server.log; exit 1; }; \
		echo "dev server on 127.0.0.1:$(DEV_PORT), Web UI http://127.0.0.1:$(UI_PORT)"; \
	fi

# The server takes a few seconds to shut down: wait for it, so that a
# `make demo` right after finds the port free, not a server on its way out.
dev-server-stop:
	@if [ -f $(STATE)/dev-server.pid ]; then \
		pid=$$(cat $(STATE)/dev-server.pid); kill $$pid 2>/dev/null || true; \
		for i in $$(seq 1 100); do kill -0 $$pid 2>/dev/null || break; sleep 0.1; done; \
		kill -0 $$pid 2>/dev/null && { echo "dev server $$pid still running after 10 s; killing it"; kill -9 $$pid; }; \
		rm -f $(STATE)/dev-server.pid; echo "dev server stopped"; \
	fi
	@if [ -f $(STATE)/codec-server.pid ]; then \
		kill $$(cat $(STATE)/codec-server.pid) 2>/dev/null || true; rm -f $(STATE)/codec-server.pid; echo "codec server stopped"; \
	fi

# Temporal's own server (go.temporal.io/server, the dev server's version)
# on PostgreSQL 15 with SQL visibility and mTLS: docs/operations.md.
cluster: temporal-cli
	CACHE=$(CACHE) TEMPORAL=$(TEMPORAL) ./scripts/cluster.sh start

cluster-stop:
	CACHE=$(CACHE) ./scripts/cluster.sh stop

# The e2e of a node's whole migration (the reference node: adopt, migrate,
# preview, flip), the plain node's adoption and the fleet's waves, against
# `make cluster` instead of a dev server of each test's own
# (tests/cluster_harness_test.go). Not in make test: it needs PostgreSQL
# and Temporal's own server built.
E2E_CLUSTER_TESTS := TestAdoptEndToEnd|TestReferenceNodeAdoption|TestFleetWavesMigrateFlip
e2e-cluster: cluster
	ADOPT_E2E_CLUSTER=$(CURDIR)/$(STATE)/cluster $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -v -run '^($(E2E_CLUSTER_TESTS))$$' ./tests/

# The seed's five steps, unattended, on three reference nodes (each its own
# Docker engine in its namespace, ufw with the ufw-docker arrangement, the
# agent on the node): dev server, nodes, fleet, migrations, preview, flips.
demo: build dev-server
	./scripts/demo.sh

demo-clean:
	./scripts/demo.sh clean

clean: demo-clean dev-server-stop
	rm -rf bin $(STATE)
	rm -f docker/temporal/temporal docker/worker/adopt-worker docker/worker/ca-certificates.crt
