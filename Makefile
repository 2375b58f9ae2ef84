# cascade's build. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
BIN := $(CURDIR)/bin
# Every build and test without host paths (-trimpath, as the release's): a package's entry in the
# Go build cache then does not depend on where the clone is, so a fresh clone (CI's) reuses what
# an earlier clone compiled, not only the dependencies. The GOFLAGS go would use (the environment's,
# else go env's file) are kept: the variable set here replaces both.
export GOFLAGS := $(strip $(filter-out -trimpath,$(shell $(GO) env GOFLAGS)) -trimpath)
export CASCADE_BIN_DIR := $(BIN)

# The control-plane tools (etcd, kube-apiserver, kube-controller-manager, kubectl) are built from
# the pinned module in e2e/tools into a cache keyed by that module's files and the Go version,
# then copied into bin/. A fresh clone on the same machine reuses the cache; changing a pinned
# version changes the key and rebuilds.
TOOLS := etcd kube-apiserver kube-controller-manager kubectl
# Kubernetes binaries report the pinned version (as release builds do) instead of v0.0.0-master.
KUBE_VERSION := v1.36.3
# The etcd that e2e/tools pins, which `make tools` builds: make e2e checks that the control plane
# runs it and KUBE_VERSION (e2e/framework: checkVersions), as the version matrix does.
KUBE_ETCD_VERSION := $(shell awk '$$1 == "go.etcd.io/etcd/server/v3" { print $$2 }' e2e/tools/go.mod)
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean
TOOLS_KEY := $(shell (cat e2e/tools/go.mod e2e/tools/go.sum e2e/tools/etcd/main.go; echo '$(KUBE_LDFLAGS)'; $(GO) env GOVERSION) 2>/dev/null | sha256sum | cut -c1-16)
TOOLS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/cascade-tools/$(TOOLS_KEY)
TOOLS_STAMP := $(BIN)/.tools-$(TOOLS_KEY)

# golangci-lint is built from the pinned module in tools/lint (its `tool` directive) the same way:
# into a cache keyed by that module's go.mod and go.sum and the Go version, then copied into bin/.
LINT_KEY := $(shell (cat tools/lint/go.mod tools/lint/go.sum; $(GO) env GOVERSION) 2>/dev/null | sha256sum | cut -c1-16)
LINT_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/cascade-tools/golangci-lint-$(LINT_KEY)
LINT_STAMP := $(BIN)/.golangci-lint-$(LINT_KEY)
GOLANGCI_LINT := $(BIN)/golangci-lint

# helm is built from the pinned module in tools/helm the same way (the chart's tests and
# `make chart-lint` use it).
# Its version and the Kubernetes version it renders for by default (helm template's
# .Capabilities.KubeVersion: client-go's minor, as helm's own Makefile stamps them; unstamped,
# helm says v1.20.0) come from that module's go.mod.
HELM_VERSION := $(shell awk '$$1 == "helm.sh/helm/v3" { print $$2 }' tools/helm/go.mod)
HELM_KUBE_MINOR := $(shell awk '$$1 == "k8s.io/client-go" { split($$2, v, "."); print v[2] }' tools/helm/go.mod)
HELM_LDFLAGS := -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
  -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_KUBE_MINOR) \
  -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_KUBE_MINOR)
HELM_KEY := $(shell (cat tools/helm/go.mod tools/helm/go.sum; echo '$(HELM_LDFLAGS)'; $(GO) env GOVERSION) 2>/dev/null | sha256sum | cut -c1-16)
HELM_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/cascade-tools/helm-$(HELM_KEY)
HELM_STAMP := $(BIN)/.helm-$(HELM_KEY)
HELM := $(BIN)/helm

# cyclonedx-gomod, which writes the release's SBOMs, is built from the pinned module in
# tools/cyclonedx the same way.
CYCLONEDX_KEY := $(shell (cat tools/cyclonedx/go.mod tools/cyclonedx/go.sum; $(GO) env GOVERSION) 2>/dev/null | sha256sum | cut -c1-16)
CYCLONEDX_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/cascade-tools/cyclonedx-gomod-$(CYCLONEDX_KEY)
CYCLONEDX_STAMP := $(BIN)/.cyclonedx-gomod-$(CYCLONEDX_KEY)
CYCLONEDX_GOMOD := $(BIN)/cyclonedx-gomod

# The Prometheus Operator's CRDs (ServiceMonitor, PrometheusRule, ...), which the e2e tests
# install so that the chart's and the monitoring component's objects are validated by the API
# server: taken from the operator's Go module (its example/prometheus-operator-crd directory),
# downloaded through the module proxy and checked against go.sum's database like any module.
PROMETHEUS_OPERATOR_VERSION := v0.94.0
PROMETHEUS_OPERATOR_CRDS := $(BIN)/prometheus-operator-crds-$(PROMETHEUS_OPERATOR_VERSION)
export CASCADE_PROMETHEUS_OPERATOR_CRDS := $(PROMETHEUS_OPERATOR_CRDS)

E2E_TIMEOUT ?= 60m
# Extra `go test` flags for the e2e suite and the version matrix, such as E2E_FLAGS=-shuffle=on
# (the tests in a random order, its seed printed: no test may depend on another's leftovers).
E2E_FLAGS ?=
# The e2e tests on control planes of their own (t.Parallel) run this many at a time, after the
# tests on the suite's shared control plane: they mostly wait on their API servers.
E2E_PARALLEL ?= 3
# The e2e suite runs in this many go test processes side by side, each with a shared control
# plane of its own and every E2E_SHARDS-th test (E2E_FIRST, then by name; its tests mostly wait
# on API servers);
# E2E_FLAGS with -run runs one process.
E2E_SHARDS ?= 2
# Dealt out first, in this order (the first, third, ... to shard 1, the others to shard 0), so
# that the shards end together: the suite's longest tests. TestDocsExamples (about 140 s, on a
# control plane of its own) fills shard 1's parallel tail, so TestFleet (about 90 s) goes with it
# and TestOrphanRecordFullNeverStalls (about 50 s) to shard 0: in two warm runs shard 0 took
# 530-540 s and shard 1 430-465 s when they were dealt the other way.
E2E_FIRST ?= TestDocsExamples TestOrphanRecordFullNeverStalls TestFleet TestRelease TestImage TestDiscoveryWithinASecond TestMonitoringOnPrometheus TestFleetShards
E2E_LOGS := $(BIN)/e2e-logs
QUICK ?=

# Version and commit stamped into cascade (`cascade --version`) and used as the image's tag.
# Override on the command line: make image VERSION=v0.1.0.
ifeq ($(origin VERSION),undefined)
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
endif
ifeq ($(origin COMMIT),undefined)
COMMIT := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
endif
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

# The container image (Dockerfile): `make image` tags $(IMAGE):$(VERSION). deploy/base and the
# chart name a version (the next release's, deploy's unit test keeps them equal), never a moving
# tag; `make release` pins install.yaml by digest. It is built with podman from Debian's packages
# (`make podman` installs them when missing): as root with runc, cgroupfs (no systemd here) and
# ulimits below the host's (podman's default, the host maximum, is refused on these machines).
IMAGE ?= ghcr.io/cascade-gc/cascade
PODMAN ?= podman
PODMAN_FLAGS ?= --runtime runc --cgroup-manager cgroupfs --events-backend file
PODMAN_ULIMITS ?= --ulimit nofile=1024:1024 --ulimit nproc=1024:1024
PODMAN_PACKAGES := podman runc uidmap fuse-overlayfs slirp4netns catatonit
IMAGE_ARCHIVE ?= $(BIN)/cascade-image-$(VERSION).oci.tar
# The architecture `make image` builds for (the host's): its binary is bin/image/ARCH/cascade,
# the path the Dockerfile copies for TARGETARCH.
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
# How the image's binary and the release's binaries are built: static (no cgo; the image has no
# libc), stripped, without host paths, the version and commit stamped in.
STATIC_BUILD_FLAGS = -trimpath -ldflags "-s -w $(LDFLAGS)"

.PHONY: help
help: ## @HELP list the targets
	@grep -E '^[a-zA-Z0-9_-]+:.*## @HELP' $(MAKEFILE_LIST) | sed -E 's/:.*## @HELP/\t/' | expand -t 16

.PHONY: build
build: ## @HELP build bin/cascade
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/cascade ./cmd/cascade
	$(GO) build -o $(BIN)/localrun ./e2e/cmd/localrun

# The image's binary (STATIC_BUILD_FLAGS). It is built here with the host's toolchain, module
# and build caches, then copied into the image (see Dockerfile for why there is no builder stage).
.PHONY: image-binary
image-binary:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build $(STATIC_BUILD_FLAGS) -o $(BIN)/image/$(IMAGE_ARCH)/cascade ./cmd/cascade

.PHONY: image
image: podman image-binary ## @HELP build the container image $(IMAGE):$(VERSION) for the host's architecture with podman (installed when missing)
	$(PODMAN) $(PODMAN_FLAGS) build --layers=false $(PODMAN_ULIMITS) --platform linux/$(IMAGE_ARCH) --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) \
	  -t $(IMAGE):$(VERSION) -f Dockerfile .
	@$(PODMAN) $(PODMAN_FLAGS) image inspect --format '{{.Id}} {{.Size}} bytes user {{.Config.User}}' $(IMAGE):$(VERSION)

.PHONY: image-archive
image-archive: image ## @HELP export the image as an OCI archive, bin/cascade-image-$(VERSION).oci.tar (for skopeo copy, podman load, ...)
	rm -f $(IMAGE_ARCHIVE)
	$(PODMAN) $(PODMAN_FLAGS) save --format oci-archive -o $(IMAGE_ARCHIVE) $(IMAGE):$(VERSION)
	@echo "wrote $(IMAGE_ARCHIVE) ($$(du -h $(IMAGE_ARCHIVE) | cut -f1)): load it with podman load -i, or push it with skopeo copy oci-archive:$(IMAGE_ARCHIVE) docker://REGISTRY/cascade:$(VERSION)"

# podman and runc come from Debian's packages. They are installed (apt-get update once, then
# install; as root, else through sudo) only when missing, so that a machine that has them
# changes nothing. `make image` and the e2e image test (TestImage) use this target.
.PHONY: podman
podman: ## @HELP install podman and runc from Debian's packages when missing
	@if command -v $(PODMAN) >/dev/null 2>&1 && command -v runc >/dev/null 2>&1; then exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1; then echo "podman or runc missing and no apt-get here: install podman and runc" >&2; exit 1; fi; \
	sudo=; if [ "$$(id -u)" != 0 ]; then sudo="sudo -n"; fi; \
	start=$$(date +%s); \
	echo "installing $(PODMAN_PACKAGES) from Debian's packages"; \
	$$sudo apt-get update -qq; \
	$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(PODMAN_PACKAGES) >/dev/null; \
	echo "installed podman $$($(PODMAN) --version | cut -d' ' -f3) and runc in $$(( $$(date +%s) - start ))s"

# A release (docs/release.md): `make release VERSION=vX.Y.Z` writes into RELEASE_DIR, from the
# checked-out commit and the pinned tools only:
# - cascade-VERSION-OS-ARCH: the CLI for each of RELEASE_PLATFORMS (STATIC_BUILD_FLAGS), and
#   cascade-VERSION-OS-ARCH.cdx.json, its CycloneDX SBOM (cyclonedx-gomod bin: the modules
#   linked into that binary, as `go version -m` reads them);
# - kubectl-cascade-VERSION-OS-ARCH.tar.gz: that binary as kubectl's plugin, kubectl-cascade
#   (the same bytes: named so, it is `kubectl cascade`), and LICENSE, regular files in a tar
#   whose names, owners and times are fixed (the commit's time) and a gzip without a name or
#   time, so the same binary gives the same archive;
# - cascade.yaml: the krew plugin manifest of those archives (tools/krew-manifest: each
#   platform's URI under RELEASE_URL and its archive's sha256);
# - cascade-VERSION-image.oci.tar: the image for linux/amd64 and linux/arm64 as one OCI archive
#   holding a multi-arch index (podman build --platform --manifest, podman manifest push --all);
#   each architecture's image is the Dockerfile around the linux binary above, so no emulation
#   is needed. Every time in it is the commit's (--timestamp), so the same commit, Go and podman
#   give the same index digest;
# - install.yaml: deploy/base rendered by kubectl kustomize with the image pinned by that digest
#   (a kustomization in a directory under bin/, since kustomize refuses an absolute resource path);
# - cascade-X.Y.Z.tgz: the chart (helm package; chart version X.Y.Z, appVersion VERSION, the
#   image tag it defaults to);
# - policy.schema.json: the policy document's JSON Schema (docs/policy.schema.json, for editors
#   and CI: docs/policy.md);
# - SHA256SUMS over all of them.
# It is written into RELEASE_DIR.tmp and moved into place at the end, so a failed release leaves
# no half-written RELEASE_DIR. The per-architecture images and the manifest list are removed
# from podman's storage afterwards: the archive is the image. (Each image's ID is the line
# `podman build -q` prints: with --manifest, --iidfile names the list instead.)
RELEASE_DIR ?= $(BIN)/release
# Where the release's files are downloaded from once published: the krew manifest's URIs.
RELEASE_URL ?= https://github.com/cascade-gc/cascade/releases/download/$(VERSION)
RELEASE_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE_IMAGE_ARCHS := amd64 arm64
# A semantic version with a leading v and no build metadata (a '+' is not allowed in an image tag).
RELEASE_VERSION_RE := ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$$
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

.PHONY: release
release: podman tools helm cyclonedx-gomod ## @HELP VERSION=vX.Y.Z: the release into bin/release (RELEASE_DIR): multi-arch image archive, CLI binaries and their SBOMs, kubectl-cascade archives and their krew manifest, install.yaml pinned by digest, the chart, the policy's JSON Schema, SHA256SUMS (docs/release.md)
	@echo '$(VERSION)' | grep -Eq '$(RELEASE_VERSION_RE)' || { echo "make release needs VERSION=vX.Y.Z (a semantic version with a v, no '+'), not '$(VERSION)'" >&2; exit 1; }
	@if [ -n "$$(git status --porcelain 2>/dev/null)" ]; then echo "warning: the tree has uncommitted changes, so this release is not commit $(COMMIT)'s alone" >&2; fi
	@start=$$(date +%s); stage=$(RELEASE_DIR).tmp; name=cascade-$(VERSION); \
	rm -rf $$stage; mkdir -p $$stage; \
	for p in $(RELEASE_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; \
	  echo "building $$name-$$os-$$arch"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build $(STATIC_BUILD_FLAGS) -o $$stage/$$name-$$os-$$arch ./cmd/cascade; \
	  $(CYCLONEDX_GOMOD) bin -json -noserial -notimestamp -version $(VERSION) -output $$stage/$$name-$$os-$$arch.cdx.json $$stage/$$name-$$os-$$arch >$$stage/.log 2>&1 \
	    || { cat $$stage/.log >&2; echo "cyclonedx-gomod bin $$name-$$os-$$arch failed" >&2; exit 1; }; \
	  adir=$$stage/.archive-$$os-$$arch; mkdir -p $$adir; \
	  install -m 0755 $$stage/$$name-$$os-$$arch $$adir/kubectl-cascade; install -m 0644 LICENSE $$adir/LICENSE; \
	  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$(SOURCE_DATE_EPOCH) --format=ustar -C $$adir -cf - kubectl-cascade LICENSE \
	    | gzip -n -9 > $$stage/kubectl-$$name-$$os-$$arch.tar.gz; \
	  rm -rf $$adir; \
	done; \
	rm -f $$stage/.log; \
	$(GO) run ./tools/krew-manifest -version $(VERSION) -url $(RELEASE_URL) -o $$stage/cascade.yaml $$stage/kubectl-$$name-*.tar.gz; \
	list=localhost/cascade-release:$(VERSION)-$$$$; iids=$$(mktemp); kdir=$$(mktemp -d -p $(BIN) .release-XXXXXX); \
	trap '$(PODMAN) $(PODMAN_FLAGS) manifest rm $$list >/dev/null 2>&1 || true; \
	  if [ -s $$iids ]; then $(PODMAN) $(PODMAN_FLAGS) rmi --force $$(cat $$iids) >/dev/null 2>&1 || true; fi; \
	  rm -rf $$iids $$kdir' EXIT; \
	$(PODMAN) $(PODMAN_FLAGS) manifest create $$list >/dev/null; \
	for arch in $(RELEASE_IMAGE_ARCHS); do \
	  echo "building the image for linux/$$arch"; \
	  mkdir -p $(BIN)/image/$$arch; cp -f $$stage/$$name-linux-$$arch $(BIN)/image/$$arch/cascade; \
	  $(PODMAN) $(PODMAN_FLAGS) build -q --layers=false $(PODMAN_ULIMITS) --platform linux/$$arch --timestamp $(SOURCE_DATE_EPOCH) \
	    --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --manifest $$list -f Dockerfile . >$$kdir/id 2>$$kdir/log \
	    || { cat $$kdir/log >&2; echo "podman build for linux/$$arch failed" >&2; exit 1; }; \
	  tail -n 1 $$kdir/id >> $$iids; \
	done; \
	$(PODMAN) $(PODMAN_FLAGS) manifest push -q --all --format oci --digestfile $$kdir/digest $$list oci-archive:$$stage/$$name-image.oci.tar:$(IMAGE):$(VERSION); \
	digest=$$(cat $$kdir/digest); \
	repo=$$(sed -n 's/^ *image: \(.*\):[^:/]*$$/\1/p' deploy/base/deployment.yaml); \
	printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\nimages:\n  - name: %s\n    newName: %s\n    digest: %s\n' \
	  $$(realpath --relative-to=$$kdir deploy/base) "$$repo" $(IMAGE) $$digest > $$kdir/kustomization.yaml; \
	{ echo "# cascade $(VERSION) (commit $(COMMIT)): deploy/base with the image pinned by digest (docs/release.md)."; \
	  $(BIN)/kubectl kustomize $$kdir; } > $$stage/install.yaml; \
	$(HELM) package deploy/chart --version $(patsubst v%,%,$(VERSION)) --app-version $(VERSION) --destination $$stage >/dev/null; \
	cp docs/policy.schema.json $$stage/policy.schema.json; \
	(cd $$stage && sha256sum -- * > SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS); \
	rm -rf $(RELEASE_DIR); mv $$stage $(RELEASE_DIR); \
	echo "wrote $(RELEASE_DIR) in $$(( $$(date +%s) - start ))s: image $(IMAGE)@$$digest"; \
	(cd $(RELEASE_DIR) && ls -l | tail -n +2 | awk '{ printf "  %10d  %s\n", $$5, $$9 }')

.PHONY: tools
tools: $(TOOLS_STAMP) ## @HELP build etcd, kube-apiserver, kube-controller-manager, kubectl (cached)

$(TOOLS_STAMP): e2e/tools/go.mod e2e/tools/go.sum e2e/tools/etcd/main.go
	@mkdir -p $(BIN) $(TOOLS_CACHE)
	@for t in $(TOOLS); do \
	  case $$t in etcd) pkg=./etcd; ldflags= ;; *) pkg=k8s.io/kubernetes/cmd/$$t; ldflags='$(KUBE_LDFLAGS)' ;; esac; \
	  GO=$(GO) tools/build-tool $(TOOLS_CACHE)/$$t e2e/tools $$pkg "$$ldflags" "$$t (Kubernetes $(KUBE_VERSION) tools module)"; \
	  cp -f $(TOOLS_CACHE)/$$t $(BIN)/$$t; \
	done
	@rm -f $(BIN)/.tools-*
	@touch $@

.PHONY: helm
helm: $(HELM_STAMP) ## @HELP build bin/helm from tools/helm (cached)

$(HELM_STAMP): tools/helm/go.mod tools/helm/go.sum
	@mkdir -p $(BIN) $(dir $(HELM_CACHE))
	@GO=$(GO) tools/build-tool $(HELM_CACHE) tools/helm helm.sh/helm/v3/cmd/helm '$(HELM_LDFLAGS)' helm
	@cp -f $(HELM_CACHE) $(HELM)
	@rm -f $(BIN)/.helm-*
	@touch $@

.PHONY: cyclonedx-gomod
cyclonedx-gomod: $(CYCLONEDX_STAMP) ## @HELP build bin/cyclonedx-gomod from tools/cyclonedx (cached), the SBOM generator of make release

$(CYCLONEDX_STAMP): tools/cyclonedx/go.mod tools/cyclonedx/go.sum
	@mkdir -p $(BIN) $(dir $(CYCLONEDX_CACHE))
	@GO=$(GO) tools/build-tool $(CYCLONEDX_CACHE) tools/cyclonedx github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod '' cyclonedx-gomod
	@cp -f $(CYCLONEDX_CACHE) $(CYCLONEDX_GOMOD)
	@rm -f $(BIN)/.cyclonedx-gomod-*
	@touch $@

.PHONY: prometheus-operator-crds
prometheus-operator-crds: $(PROMETHEUS_OPERATOR_CRDS) ## @HELP the Prometheus Operator's CRDs from its Go module ($(PROMETHEUS_OPERATOR_VERSION)), for the chart's e2e tests

$(PROMETHEUS_OPERATOR_CRDS):
	@mkdir -p $(BIN)
	@dir=$$(cd $$(mktemp -d) && GOFLAGS= GOWORK=off $(GO) mod download -json github.com/prometheus-operator/prometheus-operator@$(PROMETHEUS_OPERATOR_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
	test -n "$$dir" || { echo "go mod download github.com/prometheus-operator/prometheus-operator@$(PROMETHEUS_OPERATOR_VERSION) failed" >&2; exit 1; }; \
	rm -rf $@.tmp && mkdir -p $@.tmp && cp $$dir/example/prometheus-operator-crd/*.yaml $@.tmp/ && chmod 0644 $@.tmp/*.yaml && mv $@.tmp $@

.PHONY: chart-lint
chart-lint: helm ## @HELP helm lint deploy/chart
	$(HELM) lint --strict deploy/chart

# The version matrix: kube-apiserver of each Kubernetes version cascade is tested against, each
# built from a module that pins it (KUBE_VERSION's is e2e/tools, the others
# e2e/tools/versions/v1.MINOR, with the etcd server module that release requires), and one etcd
# per etcd minor (the newest patch of that minor the modules require: tools/kube-version-vars),
# into the same cache as the tools, one key per module made as TOOLS_KEY is (the module's
# go.mod, go.sum and etcd/main.go, the ldflags, the Go version; KUBE_VERSION's key is TOOLS_KEY,
# so its binaries, etcd 3.6 included, are the ones `make tools` built), then copied into
# bin/versions/<version>/. kubectl and kube-controller-manager stay at KUBE_VERSION: the subset
# needs neither.
KUBE_VERSIONS ?= v1.34.4 v1.35.4 v1.36.3 v1.37.2
VERSIONS_BIN := $(BIN)/versions
VERSIONS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/cascade-tools
VERSIONS_TIMEOUT ?= 30m
# The matrix's versions run side by side, each on its control plane (their tests mostly wait on
# the API servers); each one's output is printed whole once it ends, in order.
VERSIONS_PARALLEL ?= 3
VERSIONS_LOGS := $(BIN)/versions-logs
# Versions whose kube-apiserver runs with MutatingAdmissionPolicy at v1beta1 turned on (off by
# default before 1.36): with v1.34.4 at its defaults (no admission policy: the stamping pass
# alone) and v1.36.3, v1.37.2 at v1, the matrix runs each of cascade's three admission levels.
V1BETA1_ADMISSION_VERSIONS ?= v1.35.4
V1BETA1_ADMISSION_ARGS := --feature-gates=MutatingAdmissionPolicy=true --runtime-config=admissionregistration.k8s.io/v1beta1=true
# The core e2e subset run against each version: background, foreground (with a cycle), orphan,
# a CRD added and removed (watched, then its owners' dependents collected once it is deleted),
# collect rules, defaultPropagation (admission: TestPolicyDefaultOrphan; the stamping pass:
# TestPolicyDefaultStampAndUnstamp), explain, leader failover, and the feature levels cascade
# detects and shows (TestFeatureLevelsShown).
VERSIONS_RUN ?= ^(TestFeatureLevelsShown|TestBackgroundCascade|TestCustomResources|TestFinalizersForeground|TestFinalizersForegroundCycle|TestFinalizersOrphanRC|TestStartsAndWatchesNewCRD|TestCRDDeletedDependentsCollected|TestPolicyCollectNever|TestPolicyCollectAfter|TestPolicyDefaultOrphan|TestPolicyDefaultStampAndUnstamp|TestExplain|TestLeaderFailover)$$
# For version $$v (shell): minor, the pinning module mod, the ldflags that stamp the reported
# version, its cache key, and the etcd the suite runs with (one per etcd minor: etcd, the module
# etcdmod it is built from, and that module's key etcdkey), from tools/kube-version-vars.
VERSION_VARS = eval "$$(GO=$(GO) tools/kube-version-vars $$v)";

# Each kube-apiserver and etcd is built under its own lock (tools/build-tool), so this target can
# run in the background while `make tools` or another tools-versions runs: none builds a binary
# twice. Versions go newest first and etcd after kube-apiserver, so that a background run
# (make test) reaches the etcd `make tools` builds last.
.PHONY: tools-versions
tools-versions: ## @HELP build kube-apiserver and etcd of every Kubernetes version in KUBE_VERSIONS (cached per version; etcd per etcd minor) into bin/versions/<version>/
	@for v in $$(printf '%s\n' $(KUBE_VERSIONS) | sort -rV); do \
	  $(VERSION_VARS) \
	  out=$(VERSIONS_BIN)/$$v; stamp=$$out/.tools-$$key-$$etcdkey; \
	  if [ -f $$stamp ]; then continue; fi; \
	  mkdir -p $$out; \
	  GO=$(GO) tools/build-tool $(VERSIONS_CACHE)/$$key/kube-apiserver $$mod k8s.io/kubernetes/cmd/kube-apiserver "$$ldflags" "kube-apiserver $$v"; \
	  GO=$(GO) tools/build-tool $(VERSIONS_CACHE)/$$etcdkey/etcd $$etcdmod ./etcd '' "etcd $$etcd (for $$v)"; \
	  for f in $(VERSIONS_CACHE)/$$key/kube-apiserver $(VERSIONS_CACHE)/$$etcdkey/etcd; do \
	    cp -f $$f $$out/.$${f##*/}.$$$$ && mv -f $$out/.$${f##*/}.$$$$ $$out/$${f##*/}; \
	  done; \
	  rm -f $$out/.tools-*; touch $$stamp; \
	done

# The subset runs against each version in turn, on a control plane of that version's etcd and
# kube-apiserver (CASCADE_BIN_DIR=bin/versions/<version>); CASCADE_KUBE_VERSION and
# CASCADE_ETCD_VERSION make the suite refuse to run unless the servers it started report those
# versions and their binaries were built from those modules (e2e/framework: checkVersions). A
# failing version does not stop the others; the target fails at the end, naming them.
.PHONY: test-versions
test-versions: build tools-versions ## @HELP the core e2e subset (VERSIONS_RUN) against kube-apiserver and etcd of every version in KUBE_VERSIONS, VERSIONS_PARALLEL at a time
	@mkdir -p $(VERSIONS_LOGS); \
	$(GO) test -tags e2e -c -o /dev/null ./e2e/ || exit 1; \
	failed=; pids=; vs=; \
	for v in $(KUBE_VERSIONS); do \
	  if [ $$(echo $$pids | wc -w) -ge $(VERSIONS_PARALLEL) ]; then \
	    set -- $$pids; p=$$1; shift; pids="$$*"; set -- $$vs; w=$$1; shift; vs="$$*"; \
	    wait $$p || failed="$$failed $$w"; cat $(VERSIONS_LOGS)/$$w.log; \
	  fi; \
	  ( $(VERSION_VARS) \
	    apiargs=; case " $(V1BETA1_ADMISSION_VERSIONS) " in *" $$v "*) apiargs="$(V1BETA1_ADMISSION_ARGS)";; esac; \
	    echo "=== test-versions: Kubernetes $$v, etcd $$etcd$${apiargs:+, kube-apiserver $$apiargs}"; \
	    start=$$(date +%s); \
	    CASCADE_APISERVER_ARGS="$$apiargs" CASCADE_BIN_DIR=$(VERSIONS_BIN)/$$v CASCADE_KUBE_VERSION=$$v CASCADE_ETCD_VERSION=$$etcd CASCADE_BINARY=$(BIN)/cascade \
	      $(GO) test -tags e2e -count=1 -v $(E2E_FLAGS) -timeout $(VERSIONS_TIMEOUT) -run '$(VERSIONS_RUN)' ./e2e/; rc=$$?; \
	    echo "=== test-versions: Kubernetes $$v took $$(( $$(date +%s) - start ))s"; exit $$rc \
	  ) > $(VERSIONS_LOGS)/$$v.log 2>&1 & \
	  pids="$$pids $$!"; vs="$$vs $$v"; \
	done; \
	set -- $$vs; for p in $$pids; do w=$$1; shift; wait $$p || failed="$$failed $$w"; cat $(VERSIONS_LOGS)/$$w.log; done; \
	if [ -n "$$failed" ]; then echo "test-versions failed on:$$failed" >&2; exit 1; fi

.PHONY: run
run: build tools ## @HELP start the local control plane and cascade against it (Ctrl-C stops all), its /metrics and /debug plain HTTP without authentication (--metrics-secure=false); ARGS="--v=2" passes flags
	$(BIN)/localrun --cascade $(BIN)/cascade -- $(ARGS)

MEMBERS ?= 3
.PHONY: run-fleet
run-fleet: build tools ## @HELP fleet mode locally: one etcd, a host and MEMBERS=3 member kube-apiservers (each its own --etcd-prefix), cascade over them (--fleet-kubeconfig-dir)
	$(BIN)/localrun --members $(MEMBERS) --cascade $(BIN)/cascade -- $(ARGS)

# make test is CI's suite (.ci/run: make verify, then make test), run as timed steps
# (.ci/timed; CASCADE_STEPS names the file the times go to, and .ci/run prints them as one
# table). The version matrix's tools (tools-versions: three kube-apiservers and an etcd, the
# longest build of a cold run) are built in the background at nice 19 from the start, so that
# they take the CPU the unit tests and the e2e suite leave idle (the e2e tests mostly wait on
# API servers); test-versions joins them (its tools-versions waits on the background build's
# locks and finds the rest built). TOOLS_VERSIONS_BG=0: no background build (.ci/run starts its
# own before make verify). Every step runs even when one before it failed; the target fails at
# the end, naming the failed steps.
# CHAOS_BESIDE_E2E: whether TestChaos (whose driver and faults mostly wait) starts with the e2e
# step and runs beside its shards, the test-chaos step then running the rest of the chaos suite
# and TestChaos's log (bin/chaos-logs/main.log) printed after the last step. 1: always; 0: never;
# auto (the default): when the version matrix's tools are built (a warm run), since in a cold run
# the background build needs the CPU the e2e suite leaves idle.
TOOLS_VERSIONS_BG ?= 1
CHAOS_BESIDE_E2E ?= auto
# make -n runs test's recipe (it calls $(MAKE)): the background TestChaos is then printed, not run.
MAKE_DRY_RUN := $(findstring n,$(firstword -$(MAKEFLAGS)))
TEST_STEPS := test-unit test-rules tools e2e test-versions test-chaos
# make test's version matrix leaves out KUBE_VERSION: make e2e has just run the whole suite, the
# matrix's subset included, on that version's kube-apiserver and etcd (the same cached
# binaries), version-checked the same way. make test-versions alone runs every version.
TEST_VERSIONS := $(filter-out $(KUBE_VERSION),$(KUBE_VERSIONS))

.PHONY: test
test: ## @HELP every test, as CI runs them: unit tests with -race, the alert rules (promtool), the e2e suite on the local control plane, its core subset on every Kubernetes version of the matrix, the chaos suite (fixed seed) and its deterministic tests; the matrix's tools build in the background meanwhile
	@mkdir -p $(BIN); failed=; \
	if [ "$(TOOLS_VERSIONS_BG)" = 1 ]; then \
	  echo "building the version matrix's kube-apiserver and etcd in the background at nice 19 (log: bin/tools-versions-bg.log)"; \
	  nice -n 19 .ci/timed "tools-versions (background, nice 19)" $(MAKE) --no-print-directory tools-versions > $(BIN)/tools-versions-bg.log 2>&1 & bg=$$!; \
	fi; \
	chaos=; \
	for step in $(TEST_STEPS); do \
	  target=$$step; versions="$(KUBE_VERSIONS)"; \
	  if [ $$step = tools ]; then target="build tools helm prometheus-operator-crds"; fi; \
	  if [ $$step = test-versions ]; then versions="$(TEST_VERSIONS)"; fi; \
	  if [ $$step = e2e ]; then \
	    beside="$(CHAOS_BESIDE_E2E)"; \
	    if [ "$$beside" = auto ]; then \
	      beside=1; for v in $(TEST_VERSIONS); do $(VERSION_VARS) \
	        [ -x $(VERSIONS_CACHE)/$$key/kube-apiserver ] && [ -x $(VERSIONS_CACHE)/$$etcdkey/etcd ] || beside=0; \
	      done; \
	      [ $$beside = 1 ] || echo "TestChaos waits for the test-chaos step: the version matrix's tools are still being built, in the CPU the e2e suite leaves idle"; \
	    fi; \
	    if [ "$$beside" = 1 ] && [ -n "$(MAKE_DRY_RUN)" ]; then \
	      echo '.ci/timed "TestChaos (test-chaos CHAOS_PART=main, beside make e2e)" $(CHAOS_MAIN) &'; \
	    elif [ "$$beside" = 1 ]; then \
	      mkdir -p $(CHAOS_LOGS); echo "starting TestChaos beside the e2e suite (log: $(CHAOS_LOGS)/main.log, printed after the last step)"; \
	      .ci/timed "TestChaos (test-chaos CHAOS_PART=main, beside make e2e)" $(CHAOS_MAIN) > $(CHAOS_LOGS)/main.log 2>&1 & chaos=$$!; \
	    fi; \
	  fi; \
	  if [ $$step = test-chaos ] && [ -n "$$chaos" ]; then target="test-chaos CHAOS_PART=rest"; fi; \
	  KUBE_VERSIONS="$$versions" .ci/timed "make $$step" $(MAKE) --no-print-directory $$target || failed="$$failed $$step"; \
	done; \
	if [ -n "$$chaos" ]; then \
	  wait $$chaos || failed="$$failed test-chaos(TestChaos)"; echo "--- TestChaos, beside the e2e suite:"; cat $(CHAOS_LOGS)/main.log; \
	fi; \
	if [ -n "$${bg:-}" ]; then wait $$bg || true; echo "--- the background build of the version matrix's tools:"; cat $(BIN)/tools-versions-bg.log; fi; \
	if [ -n "$$failed" ]; then echo "make test failed in:$$failed" >&2; exit 1; fi

# The contributor's loop (docs/development.md): the unit tests, then the e2e core subset (the
# version matrix's VERSIONS_RUN) on KUBE_VERSION's control plane. make test stays the full suite.
.PHONY: test-quick
test-quick: build tools ## @HELP the quick loop: unit tests with -race, then the e2e core subset on one Kubernetes version (under 10 minutes warm)
	$(GO) test -race -count=1 ./...
	CASCADE_BINARY=$(BIN)/cascade $(GO) test -tags e2e -count=1 -v -timeout 20m -run '$(VERSIONS_RUN)' ./e2e/

.PHONY: test-unit
# helm first: deploy's tests render the chart with bin/helm, and its first build (minutes, then
# cached) belongs outside their go test timeout.
test-unit: helm ## @HELP unit tests with the race detector (the fast loop), then the watch decode's fuzzer for 10 s
	$(GO) test -race -count=1 ./...
	$(MAKE) --no-print-directory fuzz FUZZ_TIME=10s

# make fuzz: FuzzFastDecode (gc/fastdecode_test.go) for FUZZ_TIME: whatever the bytes, a watch
# frame the fast decode reads is one the full decode reads the same. Its seeds and the corpus in
# gc/testdata/fuzz run with every go test; make test-unit (CI) fuzzes for 10 s.
FUZZ_TIME ?= 20s
.PHONY: fuzz
fuzz: ## @HELP fuzz the fast watch decode against apimachinery's (FUZZ_TIME, default 20s)
	$(GO) test -run '^$$' -fuzz '^FuzzFastDecode$$' -fuzztime $(FUZZ_TIME) -fuzzminimizetime 2s ./gc/

.PHONY: e2e
e2e: build tools helm prometheus-operator-crds ## @HELP the e2e suite against a real etcd + kube-apiserver, in E2E_SHARDS processes side by side (each with its own shared control plane)
	@mkdir -p $(E2E_LOGS); shards=$(E2E_SHARDS); \
	case "$(E2E_FLAGS)" in *-run*) shards=1;; esac; \
	if [ "$$shards" -le 1 ]; then \
	  CASCADE_KUBE_VERSION=$(KUBE_VERSION) CASCADE_ETCD_VERSION=$(KUBE_ETCD_VERSION) CASCADE_BINARY=$(BIN)/cascade \
	    $(GO) test -tags e2e -count=1 -v -parallel $(E2E_PARALLEL) $(E2E_FLAGS) -timeout $(E2E_TIMEOUT) ./e2e/; exit $$?; \
	fi; \
	$(GO) test -tags e2e -c -o /dev/null ./e2e/ || exit 1; \
	all=$$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T) {$$/\1/p' e2e/*_test.go | sort); \
	first=$$(for x in $(E2E_FIRST); do echo "$$all" | grep -x "$$x"; done); \
	tests=$$( (echo "$$first"; echo "$$all" | grep -vxF "$$first") | grep .); \
	pids=; i=0; while [ $$i -lt $$shards ]; do \
	  run=$$(echo "$$tests" | awk -v n=$$shards -v i=$$i 'NR % n == i' | paste -sd'|'); \
	  echo "=== e2e shard $$i of $$shards: $$(echo "$$run" | tr '|' ' ' | wc -w) tests"; \
	  ( CASCADE_KUBE_VERSION=$(KUBE_VERSION) CASCADE_ETCD_VERSION=$(KUBE_ETCD_VERSION) CASCADE_BINARY=$(BIN)/cascade \
	      $(GO) test -tags e2e -count=1 -v -parallel $(E2E_PARALLEL) $(E2E_FLAGS) -timeout $(E2E_TIMEOUT) -run "^($$run)\$$" ./e2e/ \
	  ) > $(E2E_LOGS)/shard-$$i.log 2>&1 & \
	  pids="$$pids $$!"; i=$$((i+1)); \
	done; \
	failed=; i=0; for p in $$pids; do wait $$p || failed="$$failed $$i"; echo "=== e2e shard $$i:"; cat $(E2E_LOGS)/shard-$$i.log; i=$$((i+1)); done; \
	if [ -n "$$failed" ]; then echo "e2e failed in shard(s):$$failed" >&2; exit 1; fi

# The chaos suite (e2e/chaos): a seeded random driver builds an ownership graph and applies
# random operations on its own control plane while faults are injected, then checks the live
# state against an oracle of the GC semantics and cascade's writes against the audit log.
# `make chaos` is the long form: CHAOS_SEED (default: random, printed), CHAOS_DURATION (default
# 30m when CHAOS_OPS is not given), CHAOS_OPS, CHAOS_FAULT_EVERY (operations between faults),
# CHAOS_OBJECTS (live objects kept around), CHAOS_CONVERGE_TIMEOUT. A failure prints the exact
# command that replays it. `make test-chaos` is the reduced fixed-seed form with the suite's
# deterministic tests, part of `make test`; `make test-chaos-checks` runs the deterministic tests
# alone (bad input, CRD deleted under held owners, the oracle's and the audit check's own tests).
CHAOS_TIMEOUT ?= 180m

.PHONY: chaos
chaos: build tools ## @HELP the chaos suite, long form (CHAOS_SEED, CHAOS_DURATION=30m, CHAOS_OPS, CHAOS_FAULT_EVERY, CHAOS_OBJECTS)
	@seed=$${CHAOS_SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; \
	dur=$${CHAOS_DURATION:-}; if [ -z "$$dur" ] && [ -z "$${CHAOS_OPS:-}" ]; then dur=30m; fi; \
	echo "chaos: CHAOS_SEED=$$seed CHAOS_DURATION=$$dur CHAOS_OPS=$${CHAOS_OPS:-}"; \
	CHAOS_SEED=$$seed CHAOS_DURATION=$$dur CHAOS_FAULT_EVERY=$${CHAOS_FAULT_EVERY:-100} CHAOS_OBJECTS=$${CHAOS_OBJECTS:-400} \
	  CASCADE_BINARY=$(BIN)/cascade $(GO) test -tags e2e -count=1 -v -run '^TestChaos$$' -timeout $(CHAOS_TIMEOUT) ./e2e/chaos/

.PHONY: chaos-fleet
chaos-fleet: build tools ## @HELP the chaos suite over a fleet: 3 members, 2 replicas with shards, faults on both (CHAOS_SEED, CHAOS_FLEET_MEMBERS, CHAOS_FLEET_OPS, CHAOS_FLEET_OBJECTS, CHAOS_FLEET_FAULT_EVERY)
	CASCADE_BINARY=$(BIN)/cascade $(GO) test -tags e2e -count=1 -v -run '^TestChaosFleet$$' -timeout 30m ./e2e/chaos/

.PHONY: test-chaos-checks
test-chaos-checks: build tools ## @HELP the chaos suite's deterministic e2e tests only (bad input, CRD deleted under held owners, the oracle's and the audit check's tests)
	CASCADE_BINARY=$(BIN)/cascade $(GO) test -tags e2e -count=1 -v -timeout 20m -run '^(TestBadInput|TestCRDDeletedOwnerHeldByFinalizer|TestAudit.*|TestOracle.*)$$' ./e2e/chaos/

.PHONY: test-chaos
# Two go test processes side by side, each log printed whole once it ends (bin/chaos-logs/):
# TestChaos, whose driver and faults mostly wait (a third of the 2 cores, measured with vmstat in
# a warm CI run), beside the rest (TestChaosFleet, TestBadInput, ..., which keep the cores busy).
# CHAOS_SHARDS=1 runs them in one process, one after another as go test orders them.
CHAOS_SHARDS ?= 2
CHAOS_PART ?= all
CHAOS_LOGS := $(BIN)/chaos-logs
TEST_CHAOS_ENV := CHAOS_SEED=1 CHAOS_OPS=3000 CHAOS_DURATION= CHAOS_FAULT_EVERY=60 CHAOS_OBJECTS=250 CHAOS_CONVERGE_TIMEOUT=3m CHAOS_FLEET_ROUNDS=1 \
	  CASCADE_BINARY=$(BIN)/cascade
# The two halves: TestChaos, and the rest of the suite.
CHAOS_MAIN = env $(TEST_CHAOS_ENV) $(GO) test -tags e2e -count=1 -v -timeout 20m -run '^TestChaos$$' ./e2e/chaos/
CHAOS_REST = env $(TEST_CHAOS_ENV) $(GO) test -tags e2e -count=1 -v -timeout 20m -skip '^TestChaos$$' ./e2e/chaos/
test-chaos: build tools ## @HELP the chaos suite's reduced fixed-seed form (seed 1, 3,000 operations; over a fleet, every fault type once) and its deterministic tests (CHAOS_PART=main: TestChaos alone; rest: the others)
	@if [ "$(CHAOS_PART)" = main ]; then \
	  $(CHAOS_MAIN); exit $$?; \
	fi; \
	if [ "$(CHAOS_PART)" = rest ]; then \
	  $(CHAOS_REST); exit $$?; \
	fi; \
	if [ "$(CHAOS_SHARDS)" -le 1 ]; then \
	  $(TEST_CHAOS_ENV) $(GO) test -tags e2e -count=1 -v -timeout 20m ./e2e/chaos/; exit $$?; \
	fi; \
	mkdir -p $(CHAOS_LOGS); \
	$(GO) test -tags e2e -c -o /dev/null ./e2e/chaos/ || exit 1; \
	echo "=== test-chaos: TestChaos beside the rest of the suite (logs: $(CHAOS_LOGS))"; \
	( $(CHAOS_MAIN) ) > $(CHAOS_LOGS)/chaos.log 2>&1 & a=$$!; \
	( $(CHAOS_REST) ) > $(CHAOS_LOGS)/rest.log 2>&1 & b=$$!; \
	failed=; \
	wait $$b || failed="$$failed rest"; echo "=== test-chaos: the rest of the suite:"; cat $(CHAOS_LOGS)/rest.log; \
	wait $$a || failed="$$failed TestChaos"; echo "=== test-chaos: TestChaos:"; cat $(CHAOS_LOGS)/chaos.log; \
	if [ -n "$$failed" ]; then echo "test-chaos failed in:$$failed" >&2; exit 1; fi

# The comparison with the in-tree GC (BenchmarkCompareGC, e2e/compare) writes
# docs/benchmarks.json, then e2e/benchreport draws docs/benchmarks.md and the charts. Full size
# takes hours (3 runs per figure at 40 QPS and unthrottled); QUICK=1 minutes. BENCH_RUNS,
# BENCH_QPS ("40,0": 0 is unthrottled), BENCH_BURST, BENCH_SCENARIOS, BENCH_SEED, BENCH_WORKERS
# narrow or vary it; BENCH_PROFILE=dir keeps cascade's CPU profiles. It is resumable: the JSON is
# written after every measurement, and a rerun of the same commit and sizes measures only what
# is missing (BENCH_RESUME=1: whatever the commit; BENCH_RESUME=0: start afresh).
BENCH_TIMEOUT ?= 10h
BENCH_RUNS ?=
BENCH_QPS ?=
BENCH_BURST ?=
BENCH_SCENARIOS ?=
BENCH_SEED ?=
BENCH_WORKERS ?=
BENCH_RESUME ?=
BENCH_PROFILE ?=
# BENCH_OUT (environment): where BenchmarkCompareGC writes its JSON; bench-report draws the page
# and charts next to it.
BENCH_JSON = $(abspath $(or $(BENCH_OUT),$(CURDIR)/docs/benchmarks.json))

.PHONY: bench
bench: build tools ## @HELP benchmarks (graph; collector; cascade vs the in-tree GC, docs/benchmarks.md). QUICK=1 for a reduced set
	$(GO) test -run '^$$' -bench '$(if $(QUICK),Graph(Build/objects=100000$$|NoopUpdate),.)' -benchmem -cpu 1 ./graph/
	CASCADE_BINARY=$(BIN)/cascade QUICK=$(QUICK) $(GO) test -tags e2e -run '^$$' -bench . -benchtime 1x -timeout 60m -v ./e2e/
	CASCADE_BINARY=$(BIN)/cascade CASCADE_COMPARE=1 QUICK=$(QUICK) BENCH_RUNS=$(BENCH_RUNS) BENCH_QPS=$(BENCH_QPS) \
	  BENCH_BURST=$(BENCH_BURST) BENCH_SCENARIOS=$(BENCH_SCENARIOS) BENCH_SEED=$(BENCH_SEED) \
	  BENCH_WORKERS=$(BENCH_WORKERS) BENCH_RESUME=$(BENCH_RESUME) BENCH_PROFILE=$(BENCH_PROFILE) \
	  $(GO) test -tags e2e -run '^$$' -bench '^BenchmarkCompareGC$$' -benchtime 1x -timeout $(BENCH_TIMEOUT) -v ./e2e/compare/
	$(MAKE) bench-report

# make bench-cpu: collector CPU per collected object, cascade against the in-tree GC (issue 41):
# background 10 x 1,000 unthrottled, CPU_PAIRS pairs (default 5) in alternating order, the
# ratio per pair and the median, for the collector alone and with kube-apiserver and etcd.
# BENCH_PROFILE=dir keeps a CPU profile of each cascade window, and then prints where it went
# (e2e/cmd/cpubreakdown) and the profile's top entries.
CPU_PAIRS ?=
.PHONY: bench-cpu
bench-cpu: build tools ## @HELP collector CPU per collected object, cascade vs the in-tree GC in alternating pairs (CPU_PAIRS=5; BENCH_PROFILE=dir for profiles)
	CASCADE_BINARY=$(BIN)/cascade CASCADE_COMPARE=1 CPU_PAIRS=$(CPU_PAIRS) BENCH_WORKERS=$(BENCH_WORKERS) BENCH_PROFILE=$(BENCH_PROFILE) \
	  $(GO) test -tags e2e -run '^$$' -bench '^BenchmarkCollectorCPU$$' -benchtime 1x -timeout 60m -v ./e2e/compare/
	@if [ -n "$(BENCH_PROFILE)" ]; then \
	  echo "where cascade's CPU went (e2e/cmd/cpubreakdown over $(BENCH_PROFILE)/*.pprof):"; \
	  $(GO) tool pprof -traces $(BIN)/cascade $(BENCH_PROFILE)/*.pprof 2>/dev/null | $(GO) run ./e2e/cmd/cpubreakdown; \
	  $(GO) tool pprof -top -nodecount=15 $(BIN)/cascade $(BENCH_PROFILE)/*.pprof 2>/dev/null; \
	fi

# make bench-scale: cascade and kube-controller-manager's GC side by side on a control plane loaded
# with SCALE_OBJECTS ConfigMaps (default 100000; 1000000 loads for about half an hour here), 10%
# owned: time to synced, peak and steady RSS, Go heap, collection throughput. Results go to
# docs/scale/SCALE_OBJECTS.json. SCALE_DIR=path keeps the loaded etcd for later runs; the other
# SCALE_* variables are described in e2e/scale/scale_test.go.
SCALE_OBJECTS ?= 100000
SCALE_TIMEOUT ?= 6h

.PHONY: bench-scale
bench-scale: build tools ## @HELP cascade vs the in-tree GC holding SCALE_OBJECTS objects (default 100000): sync time, peak/steady RSS, heap, collection
	CASCADE_BINARY=$(BIN)/cascade SCALE_OBJECTS=$(SCALE_OBJECTS) \
	  $(GO) test -tags e2e -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -timeout $(SCALE_TIMEOUT) -v ./e2e/scale/

.PHONY: bench-fleet
bench-fleet: build tools ## @HELP fleet mode's cost per member (FLEET_SIZES=10,100,250), 10 members three ways side by side, and fairness under a burst (docs/fleet.md)
	CASCADE_BINARY=$(BIN)/cascade $(GO) test -tags e2e -run '^$$' -bench '$(or $(FLEET_BENCH),.)' -benchtime 1x -timeout $(or $(FLEET_TIMEOUT),120m) -v ./e2e/fleetbench/

.PHONY: bench-report
bench-report: ## @HELP draw docs/benchmarks.md and its charts from docs/benchmarks.json
	cd e2e/benchreport && $(GO) run . -in $(BENCH_JSON) -out $(patsubst %/,%,$(dir $(BENCH_JSON)))

# Prometheus and promtool come from Debian's prometheus package, installed (apt-get update once,
# then install; as root, else through sudo) only when missing, so that a machine that has them
# changes nothing. `make test-rules`, `make dashboard-snapshot` and the e2e test
# TestMonitoringOnPrometheus use this target.
PROMETHEUS ?= prometheus
PROMTOOL ?= promtool

.PHONY: prometheus
prometheus: ## @HELP install prometheus and promtool from Debian's prometheus package when missing
	@if command -v $(PROMETHEUS) >/dev/null 2>&1 && command -v $(PROMTOOL) >/dev/null 2>&1; then exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1; then echo "prometheus or promtool missing and no apt-get here: install Prometheus 2.x" >&2; exit 1; fi; \
	sudo=; if [ "$$(id -u)" != 0 ]; then sudo="sudo -n"; fi; \
	start=$$(date +%s); \
	echo "installing prometheus from Debian's packages"; \
	$$sudo apt-get update -qq; \
	$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	if ! command -v $(PROMETHEUS) >/dev/null 2>&1 || ! command -v $(PROMTOOL) >/dev/null 2>&1; then echo "installed Debian's prometheus, but $(PROMETHEUS) or $(PROMTOOL) is still not on PATH" >&2; exit 1; fi; \
	echo "installed $$($(PROMETHEUS) --version 2>&1 | head -1) in $$(( $$(date +%s) - start ))s"

# The alert rules are checked and unit tested (deploy/monitoring/alerts-test.yaml: each alert
# firing and not firing; alerts-test-*.yaml: the same tests under the other labelings a scrape
# gives cascade's series, generated by make generate) by promtool. Where promtool cannot be installed the target says so and
# passes, except in CI (CI=true), where it fails.
.PHONY: test-rules
test-rules: ## @HELP promtool check rules and promtool test rules on deploy/monitoring (prometheus installed when missing)
	@if ! $(MAKE) --no-print-directory prometheus; then \
	  if [ "$${CI:-}" = true ]; then echo "CI=true, and promtool cannot be installed: the alert rules must be tested" >&2; exit 1; fi; \
	  echo "SKIP: promtool cannot be installed here (make prometheus: Debian's prometheus package), so the alert rules are not tested"; exit 0; \
	fi; \
	$(PROMTOOL) check rules deploy/monitoring/alerts.yaml; \
	cd deploy/monitoring && $(PROMTOOL) test rules alerts-test.yaml alerts-test-*.yaml

# A small cascade (owners deleted in the background and in the foreground) on the local control
# plane, scraped every second by a real Prometheus (TestMonitoringOnPrometheus); the dashboard's
# key panels are then read back with query_range into docs/dashboard-snapshot.json, which
# e2e/benchreport draws as docs/dashboard-*.png.
.PHONY: dashboard-snapshot
dashboard-snapshot: build tools prometheus ## @HELP run a small cascade under Prometheus and draw the dashboard's key panels to docs/dashboard-*.png
	CASCADE_BINARY=$(BIN)/cascade CASCADE_DASHBOARD_SNAPSHOT=$(CURDIR)/docs/dashboard-snapshot.json \
	  $(GO) test -tags e2e -count=1 -v -run '^TestMonitoringOnPrometheus$$' -timeout 20m ./e2e/
	cd e2e/benchreport && $(GO) run . dashboard -in $(CURDIR)/docs/dashboard-snapshot.json -out $(CURDIR)/docs

.PHONY: generate
generate: ## @HELP regenerate docs/metrics.md (from the registry), docs/flags.md (from the flag set), the policy's JSON Schema (docs/policy.schema.json and the chart's values.schema.json policy, from package policy), the monitoring files made from deploy/monitoring (chart, component, rule tests per labeling), deploy/chart/README.md (from values.yaml's comments) and the operator docs' command blocks (from docs/examples)
	$(GO) test ./cmd/cascade -run '^(TestMetricsDoc|TestFlagsDoc|TestPolicySchema)$$' -count=1 -update
	$(GO) test ./deploy -run '^TestGeneratedMonitoring$$' -count=1 -update
	$(GO) test ./deploy -run '^TestChartReadme$$' -count=1 -update
	$(GO) test ./docs -run '^TestDocsExamples$$' -count=1 -update

.PHONY: verify
verify: ## @HELP gofmt, go vet, go mod tidy diff (every module), generated docs up to date, then lint; .ci/run runs it before the tests
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	@$(GO) test ./cmd/cascade -run '^(TestMetricsDoc|TestFlagsDoc|TestPolicySchema)$$' -count=1 >/dev/null || { echo "docs/metrics.md, docs/flags.md or the policy schema (docs/policy.schema.json, the policy in deploy/chart/values.schema.json) is stale: run make generate"; exit 1; }
	@$(GO) test ./deploy -run '^TestGeneratedMonitoring$$' -count=1 >/dev/null || { echo "the monitoring files generated from deploy/monitoring (chart, component, rule tests) are stale: run make generate"; exit 1; }
	@$(GO) test ./deploy -run '^TestChartReadme$$' -count=1 >/dev/null || { echo "deploy/chart/README.md is stale, or a value of deploy/chart/values.yaml has no comment: run make generate"; exit 1; }
	@$(GO) test ./docs -run '^TestDocsExamples$$' -count=1 || { echo "the operator docs' command blocks differ from docs/examples, or a command block is not from docs/examples: run make generate, or move the commands into a script there"; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	cd e2e/benchreport && $(GO) vet ./... && $(GO) mod tidy -diff
	$(GO) mod tidy -diff
	cd e2e/tools && $(GO) mod tidy -diff
	for m in e2e/tools/versions/*/; do (cd $$m && $(GO) mod tidy -diff); done
	cd tools/lint && $(GO) mod tidy -diff
	cd tools/helm && $(GO) mod tidy -diff
	cd tools/cyclonedx && $(GO) mod tidy -diff
	@$(MAKE) --no-print-directory lint

.PHONY: lint
# --allow-parallel-runners: another checkout on the same machine may lint at the same time
# (golangci-lint otherwise refuses to start while it holds its lock).
lint: $(LINT_STAMP) ## @HELP golangci-lint (.golangci.yml) on cascade with the e2e tag, then on e2e/benchreport
	@status=0; \
	$(GOLANGCI_LINT) run --allow-parallel-runners ./... || status=1; \
	(cd e2e/benchreport && $(GOLANGCI_LINT) run --allow-parallel-runners --config $(CURDIR)/.golangci.yml ./...) || status=1; \
	exit $$status

$(LINT_STAMP): tools/lint/go.mod tools/lint/go.sum
	@mkdir -p $(BIN) $(dir $(LINT_CACHE))
	@GO=$(GO) tools/build-tool $(LINT_CACHE) tools/lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint '' golangci-lint
	@cp -f $(LINT_CACHE) $(GOLANGCI_LINT)
	@rm -f $(BIN)/.golangci-lint-*
	@touch $@

.PHONY: clean
clean: ## @HELP remove bin/ (the tools and golangci-lint cache in ~/.cache/cascade-tools stays)
	rm -rf $(BIN)
