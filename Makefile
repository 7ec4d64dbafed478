# nodeagent: the front door. Every target does its own setup.
# Versions and locations are pinned here, once.

VERSION        ?= 0.1.0
REGISTRY       ?= 127.0.0.1:5050
PAUSE_IMAGE    ?= $(REGISTRY)/nodeagent/pause:1.0
TEST_IMAGE     ?= $(REGISTRY)/nodeagent/test:latest
RUNTIME_DIR    ?= /var/lib/nodeagent-runtime
RUNTIME_RUN_DIR?= /run/nodeagent-runtime
CRI_ENDPOINT   ?= unix://$(RUNTIME_RUN_DIR)/containerd.sock
# The cluster tests' node address, on a local link runtime-up makes (the
# API server does not proxy to loopback).
NODE_ADDRESS   ?= 198.18.0.1
# make run: where the examples are copied to and the agent keeps its state.
RUN_DIR        ?= /var/lib/nodeagent-dev

# Tools the Makefile installs from the module proxy into bin/tools.
STATICCHECK_VERSION ?= v0.8.2

SHELL    := /bin/bash
GO       ?= go
BIN_DIR  := bin
LDFLAGS  := -X nodeagent/internal/version.Version=$(VERSION)
export RUNTIME_DIR RUNTIME_RUN_DIR REGISTRY PAUSE_IMAGE TEST_IMAGE BIN_DIR NODE_ADDRESS

.DEFAULT_GOAL := help
.PHONY: kubelet integration-loaded mixin-series controlplane conformance-upstream conformance-upstream-quick conformance-upstream-serial conformance-upstream-serial-quick conformance-upstream-v2 conformance-upstream-cpumanager upstream-build cluster cluster-down cluster-status verify lint tools help build install uninstall images deps runtime-up runtime-down runtime-status run test unit integration conformance fuzz test-v2 test-v2-full vm-image bench lint clean

help: ## show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  make %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/nodeagent, bin/nodectl and bin/nodetest
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/nodeagent ./cmd/nodeagent
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/nodectl ./cmd/nodectl
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/nodetest ./cmd/nodetest

mixin-series: ## build bin/mixin-series: the series the kubernetes-mixin's kubelet rules read (test/mixin, its own module)
	cd test/mixin && $(GO) build -o $(CURDIR)/$(BIN_DIR)/mixin-series .

install: build ## install binaries, the systemd unit and a default config under /etc/nodeagent (DESTDIR, PREFIX honoured)
	@hack/install.sh install

uninstall: ## remove what install put in place (a changed config is kept; pods keep running)
	@hack/install.sh uninstall

images: ## build the pause and test images (OCI layouts in bin/images/oci)
	@$(MAKE) --no-print-directory deps
	@mkdir -p $(BIN_DIR)/images
	$(CC) -static -Os -s -Wall -Wextra -Werror -o $(BIN_DIR)/images/pause cmd/pause/pause.c
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN_DIR)/images/memhog ./cmd/memhog
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN_DIR)/images/probe-server ./cmd/probe-server
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN_DIR)/images/nnp ./cmd/nnp
	$(GO) build -o $(BIN_DIR)/imagetool ./cmd/imagetool
	$(BIN_DIR)/imagetool --out $(BIN_DIR)/images/oci --pause-bin $(BIN_DIR)/images/pause \
		--helpers $(BIN_DIR)/images/memhog,$(BIN_DIR)/images/probe-server \
		--pause-image $(PAUSE_IMAGE) --test-image $(TEST_IMAGE)

deps: ## install missing Debian packages (containerd, runc, CNI plugins, registry, busybox)
	@hack/runtime.sh deps

runtime-up: deps images ## start registry + containerd in the background and push images (idempotent)
	@hack/runtime.sh up

runtime-down: ## stop containerd and the registry (running pods are left alone)
	@hack/runtime.sh down

runtime-status: ## say whether containerd and the registry are running
	@hack/runtime.sh status

run: build runtime-up ## bring the node up and run the agent in the foreground with examples/pods
	@mkdir -p $(RUN_DIR)/manifests
	@cp examples/pods/*.yaml $(RUN_DIR)/manifests/
	@sed -e 's|@CRI_ENDPOINT@|$(CRI_ENDPOINT)|' -e 's|@MANIFESTS@|$(RUN_DIR)/manifests|' \
		-e "$$(. hack/lib.sh && cgroup_v1_config)" examples/nodeagent.yaml > $(RUN_DIR)/nodeagent.yaml
	@echo "nodeagent: config $(RUN_DIR)/nodeagent.yaml, manifests $(RUN_DIR)/manifests; Ctrl-C stops the agent (pods keep running)"
	$(BIN_DIR)/nodeagent --config $(RUN_DIR)/nodeagent.yaml

controlplane: ## build bin/controlplane and bin/kubectl from k8s.io/kubernetes (hack/controlplane; cached by version, cold about 6 min)
	@GO=$(GO) hack/cluster.sh build

# conformance-upstream's node: nodeagent, or kubelet for the control run.
AGENT ?= nodeagent

conformance-upstream: build runtime-up ## run the upstream [NodeConformance] specs against nodeagent, or with AGENT=kubelet against the real kubelet as a control (results in bin/conformance-upstream[-kubelet]; docs/upstream-conformance.md)
	@GO=$(GO) BIN_DIR=$(BIN_DIR) AGENT=$(AGENT) hack/upstream.sh run

conformance-upstream-quick: build runtime-up ## the upstream specs CI runs: a named subset of conformance-upstream (hack/upstream.sh QUICK_GROUPS), a few minutes
	@GO=$(GO) BIN_DIR=$(BIN_DIR) AGENT=$(AGENT) hack/upstream.sh quick

conformance-upstream-serial: build runtime-up ## the upstream [Serial] specs that reconfigure and restart the node (eviction, OOM, PIDs, critical pods, restarts, log rotation, image GC), one at a time, through sudo and systemctl stand-ins; AGENT=kubelet for the control run (results in bin/conformance-upstream-serial[-kubelet]; hours)
	@GO=$(GO) BIN_DIR=$(BIN_DIR) AGENT=$(AGENT) hack/upstream.sh serial

conformance-upstream-serial-quick: build runtime-up ## the serial specs CI runs: OOMKiller and PodPidsLimit, about 2 minutes (hack/upstream.sh SERIAL_QUICK)
	@GO=$(GO) BIN_DIR=$(BIN_DIR) AGENT=$(AGENT) hack/upstream.sh serial-quick

conformance-upstream-v2: build runtime-up vm-image ## the upstream serial specs that need systemd, logind and a system bus (GracefulNodeShutdown) in the cgroup v2 VM: suite, services and nodeagent inside it (results in bin/v2-upstream/bin/conformance-upstream-serial; about 5 min)
	@GO=$(GO) BIN_DIR=$(BIN_DIR) PAUSE_IMAGE=$(PAUSE_IMAGE) hack/upstream.sh serial-v2

conformance-upstream-cpumanager: build runtime-up vm-image ## the upstream CPU manager specs (static policy, its options, CFS quota, metrics) in the cgroup v2 VM of 8 vCPUs on 4 SMT cores (results in bin/v2-upstream/bin/conformance-upstream-serial; about 40 min)
	@GO=$(GO) BIN_DIR=$(BIN_DIR) PAUSE_IMAGE=$(PAUSE_IMAGE) hack/upstream.sh cpumanager-v2

upstream-build: ## build the upstream node e2e suite (e2e_node.test, ginkgo, agnhost) from k8s.io/kubernetes into bin/upstream (hack/e2enode; cached by release)
	@GO=$(GO) hack/upstream.sh build

kubelet: ## build bin/upstream/kubelet, the real kubelet of the release, the peer make bench measures against (hack/e2enode; cached by release)
	@GO=$(GO) hack/upstream.sh kubelet

cluster: build runtime-up controlplane ## a local control plane and nodeagent joined to it, in the background; prints KUBECONFIG=...
	@CRI_ENDPOINT=$(CRI_ENDPOINT) hack/cluster.sh up

cluster-down: ## drain the node, stop nodeagent and the control plane
	@hack/cluster.sh down

cluster-status: ## say whether the control plane and the agent of make cluster run
	@hack/cluster.sh status

STATICCHECK := $(BIN_DIR)/tools/staticcheck-$(STATICCHECK_VERSION)

$(STATICCHECK):
	GOBIN=$(CURDIR)/$(BIN_DIR)/tools $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(BIN_DIR)/tools/staticcheck $@

tools: $(STATICCHECK) ## install the checkers make verify runs (staticcheck, pinned)

verify: $(STATICCHECK) ## gofmt, go vet, go mod tidy, staticcheck, no tracked file over 1 MiB, import boundaries, the root layout in internal/layout, agent files under 500 lines, documented flags exist
	@STATICCHECK=$(STATICCHECK) GO=$(GO) hack/verify.sh

lint: verify ## the same as verify

test: verify unit integration ## make verify, unit tests, then integration tests against the real runtime (the conformance suite among them)

unit: ## unit tests (no root, no daemons)
	$(GO) test -count=1 ./...
	cd hack/e2enode && $(GO) test -count=1 ./report/

integration: build mixin-series runtime-up controlplane kubelet ## integration tests in test/ against the real containerd, runc, CNI, cgroups, control plane and kubelet (the peer launcher's test)
	KUBELET_BIN=$(CURDIR)/$(BIN_DIR)/upstream/kubelet RUNTIME_BIN=$(CURDIR)/$(BIN_DIR)/runtime CRI_ENDPOINT=$(CRI_ENDPOINT) NODEAGENT_BIN=$(CURDIR)/$(BIN_DIR)/nodeagent NODECTL_BIN=$(CURDIR)/$(BIN_DIR)/nodectl CONTROLPLANE_BIN=$(CURDIR)/$(BIN_DIR)/controlplane \
		MIXIN_SERIES_BIN=$(CURDIR)/$(BIN_DIR)/mixin-series \
		TEST_IMAGE=$(TEST_IMAGE) PAUSE_IMAGE=$(PAUSE_IMAGE) $(GO) test -count=1 -tags integration -timeout 40m -v ./test/integration/ 2>&1 | tee $(BIN_DIR)/integration.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go'; \
		exit $${PIPESTATUS[0]}
	$(GO) test -count=1 -tags integration -run Live -v ./cgroups/ ./eviction/ ./internal/mounts/

# The eviction tests of make test, run again with the CPUs saturated (2 busy
# loops per core started by the tests): .ci/run runs them once so.
EVICTION_TESTS = ^Test(MemoryAllocatableEviction|EvictionOrder|FastHogIsEvictedBeforeTheOOMKiller|HardMemoryVictimIsKilledAtOnce|DiskPressureEvictsTheWriter|ReclaimedLayerSpaceIsWaitedFor|EmptyDirOverItsSizeLimitIsEvicted|EphemeralStorageLimitsAreEnforced|BurstableOverRequestGoesFirst|QOSReservedCapsTheLowerClasses|BestEffortBombExperimentEndToEnd)$$

integration-loaded: build mixin-series runtime-up controlplane ## the eviction integration tests with the CPUs saturated (2 busy loops per core)
	NODEAGENT_TEST_CPU_LOAD=2 CRI_ENDPOINT=$(CRI_ENDPOINT) NODEAGENT_BIN=$(CURDIR)/$(BIN_DIR)/nodeagent NODECTL_BIN=$(CURDIR)/$(BIN_DIR)/nodectl CONTROLPLANE_BIN=$(CURDIR)/$(BIN_DIR)/controlplane \
		MIXIN_SERIES_BIN=$(CURDIR)/$(BIN_DIR)/mixin-series \
		TEST_IMAGE=$(TEST_IMAGE) PAUSE_IMAGE=$(PAUSE_IMAGE) $(GO) test -count=1 -tags integration -timeout 20m -v -run '$(EVICTION_TESTS)' ./test/integration/ 2>&1 | tee $(BIN_DIR)/integration-loaded.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic|busy node)|_test.go'; \
		exit $${PIPESTATUS[0]}

conformance: build runtime-up ## run the node conformance suite against an agent started on this node (ARGS="--focus RE ...")
	@mkdir -p $(BIN_DIR)/conformance
	$(BIN_DIR)/nodetest conformance --launch --dir $(BIN_DIR)/conformance --agent-bin $(BIN_DIR)/nodeagent \
		--runtime-endpoint $(CRI_ENDPOINT) --image $(TEST_IMAGE) --junit $(BIN_DIR)/conformance/junit.xml $(ARGS)

FUZZTIME ?= 1m
fuzz: ## run every fuzz target for FUZZTIME each (default 1m; make test runs their seeds)
	@GO=$(GO) hack/fuzz.sh $(FUZZTIME)

V2_WORK := $(BIN_DIR)/v2

vm-image: ## build (or reuse the cached) cgroup v2 test VM: Debian + systemd under qemu TCG
	@hack/vm.sh image >/dev/null

# The Go integration tests that matter on cgroup v2, run in the VM by
# test-v2: cgroup values, qosReserved, stats, OOM, restart, hostPath, swap,
# graceful node shutdown against the VM's systemd-logind, exclusive CPUs.
V2_GO_TESTS ?= ^(TestQoSPodsRunInTheirCgroupsAndAreCleanedUp|TestCPUManagerStaticExclusiveCPUs|TestGracefulNodeShutdown|TestQOSReservedCapsTheLowerClasses|TestStatsSummaryAgreesWithTheCgroupFiles|TestOOMKilledReason|TestAgentRestartKeepsContainersRunning|TestHostPathTypesOnTheNode|TestLimitedSwap)$$

test-v2: build runtime-up vm-image ## boot the cgroup v2 VM: the v2 smoke lane and the Go integration tests of V2_GO_TESTS inside it
	@rm -rf $(V2_WORK) && mkdir -p $(V2_WORK)/bin $(V2_WORK)/deploy
	@cp $(BIN_DIR)/nodeagent $(BIN_DIR)/nodectl $(V2_WORK)/bin/
	@cp -rL $(BIN_DIR)/runtime $(V2_WORK)/runtime
	@$(GO) test -c -tags integration -o $(V2_WORK)/bin/cgroups.test ./cgroups
	@$(GO) test -c -tags integration -o $(V2_WORK)/bin/eviction.test ./eviction
	@$(GO) test -c -tags integration -o $(V2_WORK)/bin/integration.test ./test/integration
	@cp -r examples $(V2_WORK)/ && cp -r deploy/containerd deploy/systemd $(V2_WORK)/deploy/
	@cp test/v2/smoke.sh test/v2/containerd.sh $(V2_WORK)/
	@if [ -n "$(V2_CONTROLPLANE)" ]; then cp $(BIN_DIR)/controlplane $(V2_WORK)/bin/; fi
	@printf '#!/bin/sh\nexport REGISTRY=$(REGISTRY) PAUSE_IMAGE=$(PAUSE_IMAGE) TEST_IMAGE=$(TEST_IMAGE) V2_GO_TESTS='"'"'$(V2_GO_TESTS)'"'"' V2_GO_TIMEOUT=$(V2_GO_TIMEOUT) V2_CONTROLPLANE=$(V2_CONTROLPLANE)\nexec /work/smoke.sh\n' > $(V2_WORK)/run.sh && chmod +x $(V2_WORK)/run.sh
	@VM_TIMEOUT=$(V2_VM_TIMEOUT) hack/vm.sh run $(CURDIR)/$(V2_WORK); code=$$?; grep -E '^(PASS|FAIL|==|  )' $(V2_WORK)/run.log; exit $$code

V2_GO_TIMEOUT ?= 20m
# V2_CONTROLPLANE=1 also runs bin/controlplane in the VM, for the cluster
# tests among V2_GO_TESTS (slow under TCG: not in CI's lane).
V2_CONTROLPLANE ?=
V2_VM_TIMEOUT ?= 1800

# The whole suite under TCG: V2_FULL_TIMEOUT bounds the Go tests, the VM gets
# 15 minutes more.
V2_FULL_TIMEOUT ?= 120

test-v2-full: ## the cgroup v2 lane with the whole Go integration suite in the VM (cluster tests need the host's control plane and fail there); V2_FULL_TIMEOUT minutes
	@$(MAKE) --no-print-directory test-v2 V2_GO_TESTS=. V2_GO_TIMEOUT=$(V2_FULL_TIMEOUT)m V2_VM_TIMEOUT=$$(( ($(V2_FULL_TIMEOUT) + 15) * 60 ))

# The kubelet side of make bench: the real kubelet on a containerd of its own.
PEER_ENV = KUBELET_BIN=$(CURDIR)/$(BIN_DIR)/upstream/kubelet RUNTIME_BIN=$(CURDIR)/$(BIN_DIR)/runtime

bench: build runtime-up controlplane kubelet ## pod start latency (one pod; 110 at once, standalone and API-server mode) and footprint, 110 pods' probes, eviction latencies: nodeagent, the direct-CRI floor and the kubelet side by side (reported, not asserted)
	$(PEER_ENV) CRI_ENDPOINT=$(CRI_ENDPOINT) NODEAGENT_BIN=$(CURDIR)/$(BIN_DIR)/nodeagent CONTROLPLANE_BIN=$(CURDIR)/$(BIN_DIR)/controlplane \
		$(GO) run ./e2e/bench/podstart
	$(PEER_ENV) CRI_ENDPOINT=$(CRI_ENDPOINT) NODEAGENT_BIN=$(CURDIR)/$(BIN_DIR)/nodeagent TEST_IMAGE=$(TEST_IMAGE) \
		$(GO) run ./e2e/bench/probes
	$(PEER_ENV) CRI_ENDPOINT=$(CRI_ENDPOINT) NODEAGENT_BIN=$(CURDIR)/$(BIN_DIR)/nodeagent TEST_IMAGE=$(TEST_IMAGE) CONTROLPLANE_BIN=$(CURDIR)/$(BIN_DIR)/controlplane \
		$(GO) run ./e2e/bench/eviction


clean: ## remove build outputs (the runtime's state is kept; see runtime-down)
	rm -rf $(BIN_DIR)
