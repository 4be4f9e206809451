# eks-node-drainer: every entry point bootstraps .venv from nothing but python3 and make.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# PYTHONDONTWRITEBYTECODE is set empty (off) for every recipe and every process they
# start, whatever the caller's environment says: with it set, nothing of this tree
# is ever cached as .pyc (__pycache__/ is ignored by git), so each pytest collection
# (a worker's, the alone run's) rewrote every test module's asserts (10-12 s each,
# 5 s once cached) and each Python the tests start compiled drainer/ anew (about
# 0.4 s of CPU); and the venvs, which uv installs without byte code, would compile
# what they import (boto3, checkov) in every process.
export PYTHONDONTWRITEBYTECODE :=

.PHONY: help test lint types unit cfn-lint venv clean checkov controlplane lambdarie kubectl wheel
.DEFAULT_GOAL := help

# make help: every target, one line each (tests/deploy/test_deploy_readme.py keeps it whole).
help:
	@echo "Try it (no AWS account needed):"
	@echo "  make demo          a scale-in drained by the real handler on kubesim + awssim (DEMO_ARGS=)"
	@echo "Deploy and operate (README \"Quick start\", docs/operations.md):"
	@echo "  make preflight     read-only checks of the cluster, its groups and k8s-rbac/"
	@echo "  make deploy        build, upload and deploy the stack (CLUSTER_NAME= ASG_NAMES= or ASG_TAG=)"
	@echo "  make logs          the function's log as readable lines (SINCE= FOLLOW=1 INSTANCE= NODE=)"
	@echo "  make undeploy      delete the stack and any hook of its left (YES=1 to do it)"
	@echo "  make package       build the Lambda zip only (ARCH=arm64|x86_64)"
	@echo "  make wheel         the CLI as a wheel in dist/: eks-node-drainer and kubectl-drainer"
	@echo "Check and measure:"
	@echo "  make test          every check: lint, types, unit and end-to-end tests, cfn-lint, checkov"
	@echo "  make lint          ruff, the import contracts, dead code, sizes and the glossary's retired words"
	@echo "  make types         mypy"
	@echo "  make unit          pytest alone (PYTEST_WORKERS=4)"
	@echo "  make cfn-lint      cfn-lint on template.yaml"
	@echo "  make checkov       checkov on template.yaml and k8s-rbac/"
	@echo "  make chaos         seeded chaos scenarios (SEEDS= SEED= BACKEND=kubesim|real)"
	@echo "  make bench         our drain against kubectl drain (BACKEND= QUICK=1)"
	@echo "  make bench-runtime a cold start and a full node's drain through the Lambda runtime (BACKEND= RUNS=)"
	@echo "  make soak          an instance refresh of a whole node group (BACKEND=)"
	@echo "Set-up (the targets above run what they need):"
	@echo "  make venv          .venv with the pinned requirements"
	@echo "  make controlplane  build the real Kubernetes control plane from Go modules (cached)"
	@echo "  make lambdarie     build the Lambda Runtime Interface Emulator from its Go module (cached)"
	@echo "  make kubectl       build kubectl from Go modules when none is on PATH (cached)"
	@echo "  make clean         remove .venv and build output"

venv: $(STAMP)

# The command line as a wheel (pip install dist/eks_node_drainer-*.whl gives the
# eks-node-drainer command and the kubectl plugin kubectl-drainer); the Lambda is the
# zip of `make package`. tests/e2e/test_wheel.py installs it into a fresh venv.
wheel: $(STAMP)
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir dist .
	@ls dist/eks_node_drainer-*.whl

# uv (pinned, from PyPI) installs a venv's pinned requirements: the same packages pip
# installs, in 15 s where pip took 90 s (make test's .venv), no byte code compiled
# ahead (the first Python to import a module caches it: PYTHONDONTWRITEBYTECODE above).
# pip does it where uv cannot be had. $(1): the venv; $(2): the requirements file;
# $(3): pip's and uv's output option (--quiet, or none).
UV_VERSION := 0.13.9
define install_pinned
	$(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION) \
	  && $(1)/bin/uv pip install $(3) --python $(1)/bin/python -r $(2) \
	  || $(1)/bin/python -m pip install $(3) --disable-pip-version-check -r $(2)
endef

$(STAMP): requirements.txt requirements-dev.txt
	@echo "installing the pinned development requirements into $(VENV) (under a minute; once)"
	$(call install_pinned,$(VENV),requirements-dev.txt,--quiet)
	touch $(STAMP)

# lint-imports: the layers of drainer/ (pyproject.toml [tool.importlinter], docs/ARCHITECTURE.md).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/vulture drainer tools --min-confidence 60
	$(PY) -m tools.sizes
	$(PY) -m tools.words
	@if grep -rn --include='*.py' 'kubesim\.io/' drainer/; then \
		echo "drainer/ must not read the emulators' own annotations (kubesim.io/*): the plan forecasts from what a real cluster shows"; exit 1; fi

types: $(STAMP)
	$(VENV)/bin/mypy

# Four workers (pytest-xdist): every test starts its own kubesim on an ephemeral port,
# so they run side by side. Most of a test's time is waiting (on a watch, a pod's
# grace, a budget's controller), so on these 2-core machines more workers than cores
# keep the cores busy: the pytest step took 965 s with 2 workers, 700-830 s with 3,
# and 753 s with 4 in a fresh clone of 5be4a32, every test passing, where 3 took
# 848 s on the same commit (issue 39). Two earlier runs with 4 each failed a test that
# waits on the real control plane's controllers or holds a wall time; should one fail
# again under this load, `make test PYTEST_WORKERS=3` tells a slow machine from a
# broken test.
# Work stealing: a worker that runs out takes tests from another's queue, so a
# minute-long test near the end of one queue leaves no worker idle.
# The tests marked `alone` hold a drain's wall time to a forecast within 20 % or to
# the budgets' pace: they run after the others, on a machine no other worker loads
# (with 3 workers the soak's small refresh once took 13.7 s against a 10 s plan).
PYTEST_WORKERS ?= 4
PYTEST = $(PY) -m pytest

# The files that hold `alone` tests, so that their run collects those files only
# (the whole suite's collection, 6-10 s, to select five tests).
ALONE_FILES = $(shell grep -rlE --include='*.py' 'pytest\.mark\.alone' tests)

unit: $(STAMP)
	$(PYTEST) --cov --cov-report= -n $(PYTEST_WORKERS) --dist worksteal --durations=20 -m "not alone"
	$(PYTEST) --cov --cov-append --cov-report=term -m alone $(ALONE_FILES)

cfn-lint: $(STAMP)
	@if [ -f template.yaml ]; then $(VENV)/bin/cfn-lint template.yaml; fi

# The real control plane (testbed/controlplane/build.sh): kube-apiserver,
# kube-controller-manager, kube-scheduler, etcd and kwok built from the Go modules
# pinned in testbed/controlplane/go.mod into ~/.cache/eks-node-drainer (or
# $$XDG_CACHE_HOME, $$EKS_DRAINER_CACHE); nothing to do once built. Needs Go.
controlplane:
	@bash testbed/controlplane/build.sh >/dev/null

# The AWS Lambda Runtime Interface Emulator (testbed/lambdarie/build.sh), built from
# its Go module pinned in testbed/lambdarie/go.mod into the same cache, for the tests
# that run the packaged zip as Lambda runs it (tests/e2e/test_lambda_runtime.py).
lambdarie:
	@bash testbed/lambdarie/build.sh >/dev/null

# kubectl for the kubectl tests when none is on PATH (testbed/kubectl/build.sh): built
# from the Kubernetes release testbed/controlplane/go.mod pins, into the same cache.
kubectl:
	@command -v kubectl >/dev/null || bash testbed/kubectl/build.sh >/dev/null

# Each step in turn, with the time it took (issue 39: the suite is kept fast by
# knowing where its time goes); the first that fails stops the run. mypy and the
# template's checks (BESIDE_STEPS: about 65 s of one core, nothing the tests need)
# run beside the others once .venv is there, while the unit step's workers leave a
# core idle part of the time (a fifth, with four workers); their output and times
# are printed at the end, and their failure fails the run. They are done long before
# the unit step's `alone` tests, which want the machine to themselves.
TEST_STEPS = lint controlplane lambdarie kubectl unit
BESIDE_STEPS = types cfn-lint checkov
BESIDE_LOG = build/beside.log
test:
	@run() { began=$$(date +%s); $(MAKE) --no-print-directory $$1 || return $$?; \
	  echo "make test: $$1 took $$(( $$(date +%s) - began )) s"; }; \
	run venv || exit $$?; \
	mkdir -p build; \
	( for step in $(BESIDE_STEPS); do run $$step || exit $$?; done ) >$(BESIDE_LOG) 2>&1 & \
	beside=$$!; \
	for step in $(TEST_STEPS); do \
	  run $$step || { status=$$?; wait $$beside; cat $(BESIDE_LOG); exit $$status; }; \
	done; \
	wait $$beside; status=$$?; cat $(BESIDE_LOG); \
	[ $$status = 0 ] || echo "make test: $(BESIDE_STEPS) failed (above)"; exit $$status

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .coverage

# --- package and deploy (tools/package.py, tools/deploy.py; docs/operations.md) ----------
# make package [ARCH=arm64|x86_64]: build/eks-node-drainer.zip and its manifest.
# make deploy CLUSTER_NAME=... ASG_NAMES=a,b and/or ASG_TAG=key=value [ARCH=] [STACK_NAME=] [YES=1]
#   [REGION=] [BUCKET=] [PARAMS_FILE=params.json] [PARAMS="DrainTimeoutSeconds=7200 ..."]
# deploy checks parameters and credentials before it builds or uploads anything.
ARCH ?=
# STACK_NAME: default the cluster's stack, eks-node-drainer-<CLUSTER_NAME> (or an
#   older eks-node-drainer stack of that cluster; tools/stacks.py). deploy shows the
#   change set and waits for a yes: YES=1 executes it unasked (CI). CHANGE_CLUSTER=1
#   lets a deploy change an existing stack's ClusterName.
STACK_NAME ?=
CHANGE_CLUSTER ?=
REGION ?=
BUCKET ?=
PARAMS_FILE ?=
PARAMS ?=
# make deploy APPLY_RBAC=1 [KUBECONFIG=] [CONTEXT=]: apply k8s-rbac/ as a cluster admin
# (context default: the cluster's ARN, as aws eks update-kubeconfig names it).
APPLY_RBAC ?=

.PHONY: package deploy checkov logs preflight undeploy chaos

package: $(STAMP)
	$(PY) -m tools.package --arch $(or $(ARCH),arm64)

deploy: $(STAMP)
	$(PY) -m tools.deploy --stack-name "$(STACK_NAME)" --cluster-name "$(CLUSTER_NAME)" \
	  --asg-names "$(ASG_NAMES)" --asg-tag "$(ASG_TAG)" --arch "$(ARCH)" --region "$(REGION)" --bucket "$(BUCKET)" \
	  --params-file "$(PARAMS_FILE)" $(if $(APPLY_RBAC),--apply-rbac) \
	  $(if $(APPLY_RBAC),$(if $(KUBECONFIG),--kubeconfig "$(KUBECONFIG)")) \
	  $(if $(APPLY_RBAC),$(if $(CONTEXT),--context "$(CONTEXT)")) \
	  $(if $(YES),--yes) $(if $(CHANGE_CLUSTER),--change-cluster) \
	  $(if $(ALLOW_MANAGED_NODE_GROUPS),AllowManagedNodeGroups=true) $(PARAMS)

# make preflight CLUSTER_NAME=... ASG_NAMES=a,b and/or ASG_TAG=key=value [REGION=] [SUBNET_IDS=a,b] [STACK_NAME=]
#   [KUBECONFIG=path [CONTEXT=name]]: read-only checks of the cluster, its groups and,
#   with a kubeconfig, k8s-rbac/ (tools/preflight.py); make deploy runs them first.
# ALLOW_MANAGED_NODE_GROUPS=1 (preflight and deploy): put our hook on EKS managed node
#   groups too, beside EKS's own (parameter AllowManagedNodeGroups=true); without it
#   naming one blocks.
SUBNET_IDS ?=
CONTEXT ?=
ALLOW_MANAGED_NODE_GROUPS ?=

preflight: $(STAMP)
	$(PY) -m tools.preflight --cluster-name "$(CLUSTER_NAME)" --asg-names "$(ASG_NAMES)" \
	  --asg-tag "$(ASG_TAG)" \
	  --region "$(REGION)" --subnet-ids "$(SUBNET_IDS)" \
	  $(if $(ALLOW_MANAGED_NODE_GROUPS),--allow-managed-node-groups) \
	  $(if $(STACK_NAME),--stack-name "$(STACK_NAME)") \
	  $(if $(KUBECONFIG),--kubeconfig "$(KUBECONFIG)") $(if $(CONTEXT),--context "$(CONTEXT)")

# make logs [CLUSTER_NAME= | STACK_NAME=] [REGION=] [SINCE=1h] [FOLLOW=1] [INSTANCE=i-... | NODE=...]:
# the function's log as readable lines, with boto3 (tools/logs.py).
SINCE ?= 1h
FOLLOW ?=
INSTANCE ?=
NODE ?=

logs: $(STAMP)
	$(PY) -m tools.logs --stack-name "$(STACK_NAME)" --cluster-name "$(CLUSTER_NAME)" \
	  --region "$(REGION)" --since "$(SINCE)" \
	  $(if $(FOLLOW),--follow) $(if $(INSTANCE),--instance-id "$(INSTANCE)") $(if $(NODE),--node "$(NODE)")

# make undeploy [CLUSTER_NAME= | STACK_NAME=] [REGION=] [YES=1]: delete the stack, then the terminate
#   hooks its function kept (tools/undeploy.py); without YES=1, only say what it would.
YES ?=

undeploy: $(STAMP)
	$(PY) -m tools.undeploy --stack-name "$(STACK_NAME)" --cluster-name "$(CLUSTER_NAME)" \
	  --region "$(REGION)" $(if $(YES),--yes)

# make chaos [SEEDS=200 | SEED=n] [BACKEND=kubesim|real]: the seeded chaos scenarios
#   (tests/e2e/test_chaos*.py; make test runs a few seeds on each backend), then what
#   they injected (tools/chaos_report.py). A failing seed says how to replay it.
BACKEND ?= kubesim
SEEDS ?= 200
SEED ?=
CHAOS_RESULTS := build/chaos/results.jsonl

chaos: $(STAMP) $(if $(filter real,$(BACKEND)),controlplane)
	@rm -f $(CHAOS_RESULTS)
	@CHAOS_SEEDS="$(SEEDS)" CHAOS_SEED="$(SEED)" CHAOS_RESULTS="$(CHAOS_RESULTS)" \
	  E2E_BACKEND="$(BACKEND)" \
	  $(PY) -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) tests/e2e/test_chaos*.py; \
	  status=$$?; $(PY) -m tools.chaos_report $(CHAOS_RESULTS); exit $$status

# --- security scan: checkov in its own venv (its dependencies clash with .venv's) -----
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed

$(CHECKOV_STAMP): requirements-checkov.txt
	$(call install_pinned,$(CHECKOV_VENV),requirements-checkov.txt,--quiet)
	touch $(CHECKOV_STAMP)

# Offline: no platform download, no update check, and only the two frameworks we
# use (checkov's kustomize detection would run kubectl).
checkov: $(CHECKOV_STAMP)
	CKV_SKIP_PACKAGE_UPDATE_CHECK=true $(CHECKOV_VENV)/bin/checkov --quiet --compact \
	  --skip-download --framework cloudformation kubernetes \
	  -f template.yaml $(wildcard k8s-rbac/*.yaml)

# --- demo (demo/, README "Try it", docs/development.md) ---------------------------
# make demo [DEMO_ARGS="--stubborn-pdb --timeout-policy force --speed 2"]
# A scale-in, drained by the real handler, on kubesim + awssim; `python -m demo --help`.
# Its own venv with only what it needs (requirements-demo.txt: 46 packages, not make
# test's 112), so that a fresh clone's first `make demo` is short; make test's .venv,
# a superset, when it is there already.
DEMO_ARGS ?=
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed
DEMO_READY := $(if $(wildcard $(STAMP)),$(STAMP),$(DEMO_STAMP))
DEMO_PY := $(if $(wildcard $(STAMP)),$(PY),$(DEMO_VENV)/bin/python)

.PHONY: demo

demo: $(DEMO_READY)
	$(DEMO_PY) -m demo $(DEMO_ARGS)

$(DEMO_STAMP): requirements-demo.txt
	@echo "make demo, first run: installing the demo's $$(grep -c '==' requirements-demo.txt) pinned packages into $(DEMO_VENV) (about 15 s; once)"
	$(call install_pinned,$(DEMO_VENV),requirements-demo.txt,)
	touch $(DEMO_STAMP)

# --- benchmark (bench/, issue 7) -------------------------------------------------------
# make bench [BACKEND=kubesim|real] [QUICK=1] [BENCH_ARGS="--runs 5 --only 1,3"]: our
# engine and kubectl drain side by side; prints the table and the targets, JSON in
# bench/results/. BACKEND=kubesim (default): on the emulator, figures from its records.
# BACKEND=real: on the real control plane (make controlplane; a fresh one per drain),
# figures from the clients' side, the largest scenarios scaled down.
# QUICK=1: small sizes, one run, 10x speed (a smoke test, no verdict; `make test` runs it).
QUICK ?=
BENCH_ARGS ?=

.PHONY: bench

bench: $(STAMP) $(if $(filter real,$(BACKEND)),controlplane)
	$(PY) -m bench --backend $(BACKEND) $(if $(QUICK),--quick) $(BENCH_ARGS)

# make bench-runtime [BACKEND=kubesim|real] [RUNS=3]: a cold start and the 110-pod
# node's drain through the Lambda runtime (awslambdaric + aws-lambda-rie; bench/runtime.py).
RUNS ?= 3

.PHONY: bench-runtime

bench-runtime: $(STAMP) lambdarie $(if $(filter real,$(BACKEND)),controlplane)
	$(PY) -m bench.runtime --backend $(BACKEND) --runs $(RUNS)

# --- instance refresh soak (soak/, issue 16) -------------------------------------------
# make soak [BACKEND=kubesim|real] [SOAK_ARGS="--nodes 30 --batch 3 --pods 600 --speed 5"]:
# the whole node group replaced 3 at a time by the real handler; prints the report
# (time against the pacing limit, requests, refusals, memory, invariants) and writes
# it with its timeline PNG to build/soak/<backend>/. Exits 1 when an invariant fails.
SOAK_ARGS ?=

.PHONY: soak

soak: $(STAMP) $(if $(filter real,$(BACKEND)),controlplane)
	$(PY) -m soak --backend $(BACKEND) --out build/soak/$(BACKEND) $(SOAK_ARGS)
