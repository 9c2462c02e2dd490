# MRC testbed. `./run.sh <target>` installs system packages first; `make <target>` assumes they are there.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
SYSTEM_PYTHON ?= /usr/bin/python3
RUN_DIR ?= runs
PYTEST_ARGS ?=

.PHONY: setup build test test-pure demo bench cli lint clean p4 p4info p4-check p4-if-present p4rt-shell help \
	vm-deps vm-image vm-test vm-box vm-clean

help:
	@echo "setup  venv with the project (can import Debian's mininet); BMV2=1 also installs BMv2/p4c"
	@echo "demo   MRC surviving faults (see README)"
	@echo "build  recompile the mypyc modules after editing them (setup.py; MRC_PURE_PYTHON=1 builds none)"
	@echo "test   unit, integration (root) and BMv2 tests"
	@echo "test-pure  the unit tests on the pure-Python modules (MRC_PURE_PYTHON=1: mypyc-compiled ones not loaded)"
	@echo "bench  benchmarks and the paper's experiments: JSON + PNG + REPORT.md under results/ (QUICK=1, ONLY=e1,e7, TARGET=, RUNS=)"
	@echo "cli    Mininet CLI on the default fabric"
	@echo "p4     compile p4src/ with p4c-bm2-ss (where p4c exists); p4info: copy p4c's P4Info over the committed one"
	@echo "p4-check  compile, then fail if the committed P4Info differs from p4c's (CI runs it where p4c is)"
	@echo "p4rt-shell  p4runtime-shell in its own venv (.venv-p4rt-shell; setup runs it): mrc-testbed p4rt-shell SWITCH"
	@echo "lint   ruff check, ruff format --check, mypy (strict for mrc_fabric, mrc_p4rt, the core and the wire)"
	@echo "vm-test  build (once, cached) a Debian 12 image of this checkout's HEAD, boot it in QEMU and run"
	@echo "       uname, the demo and the Linux target's integration tests inside (VM_SUITE=linux|integration|all)"
	@echo "vm-image  only build the image; vm-box: pack it as a Vagrant box for libvirt; vm-clean: drop the cache"
	@echo "clean  remove what a crashed run left behind; keep the newest KEEP_RUNS run directories (default \$$MRC_KEEP_RUNS or 10),"
	@echo "       then the oldest go until runs/ holds at most RUNS_MAX_MB (default \$$MRC_RUNS_MAX_MB or 1024)"

# One make at a time builds the venv (a second `make` or `./run.sh` in the same tree waits for the
# lock, then finds it built); the stamp is looked at again once the lock is held.
LOCK := flock $(VENV).lock
COMPILE_NOTE := compiling the mypyc modules (setup.py): about 4 minutes on 2 free cores, more on a busy machine
setup:
	@$(LOCK) $(MAKE) -s --no-print-directory $(VENV)/.installed
	@$(LOCK) $(MAKE) -s --no-print-directory p4rt-shell || echo "setup: note: p4runtime-shell not installed (PyPI unreachable?); make p4rt-shell retries"
	$(if $(filter 1,$(BMV2)),./scripts/install-bmv2.sh,@true)

# p4runtime-shell (p4lang) for `mrc-testbed p4rt-shell SWITCH` and the CLI's `p4rt`: its own venv,
# since it pins a protobuf older than the one the project needs
P4RT_SHELL_VENV := .venv-p4rt-shell
P4RUNTIME_SHELL := p4runtime-shell==0.0.6
p4rt-shell: $(P4RT_SHELL_VENV)/.installed
$(P4RT_SHELL_VENV)/.installed:
	$(SYSTEM_PYTHON) -m venv $(P4RT_SHELL_VENV)
	$(P4RT_SHELL_VENV)/bin/python -m pip install -q --disable-pip-version-check $(P4RUNTIME_SHELL)
	touch $@

$(VENV)/.installed: pyproject.toml setup.py
	$(SYSTEM_PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@echo "setup: installing the project and $(COMPILE_NOTE) ($$(nproc) cores here; MRC_PURE_PYTHON=1 compiles none)"
	@start=$$(date +%s); $(PY) -m pip install -q -e '.[dev]' && echo "setup: done in $$(( $$(date +%s) - start )) s"
	touch $@

test: setup p4-if-present
	$(PY) -m pytest $(PYTEST_ARGS)

# Compiled modules from an earlier build (another module list) must not outlive it.
build: setup
	@echo "build: $(COMPILE_NOTE)"
	$(LOCK) sh -c "find mrc_host -name '*.cpython-*.so' -delete; rm -f ./*__mypyc.cpython-*.so; \
	  $(PY) -m pip install -q --no-deps -e ."

# The core and simulator modules run compiled by mypyc where the install built them
# (setup.py); this runs the unit tests on their pure-Python sources as well.
test-pure: setup
	MRC_PURE_PYTHON=1 $(PY) -m pytest tests/unit $(PYTEST_ARGS)

# The live demo needs root (namespaces); without it, topologies.demo runs the simulator demo.
demo: setup p4-if-present
	$(PY) -m topologies.demo $(DEMO_ARGS)

# QUICK=1: short versions; ONLY=e1,e7: just those; TARGET=linux|bmv2: one data plane (default both,
# BMv2 where installed); RUNS=N: runs of each live experiment per data plane (default 3)
bench: setup p4-if-present
	$(PY) -m bench.run_all $(if $(QUICK),--quick,) $(if $(ONLY),--only $(ONLY),) $(if $(TARGET),--target $(TARGET),) $(if $(RUNS),--runs $(RUNS),) $(BENCH_ARGS)

cli: setup p4-if-present
	$(PY) -m topologies.testbed_main --cli $(TESTBED_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

P4C ?= p4c-bm2-ss
P4_BUILD := p4src/build
P4_SRCS := p4src/mrc_switch.p4 $(wildcard p4src/include/*.p4)

p4: $(P4_BUILD)/mrc_switch.json

# The BMv2 JSON and p4c's P4Info land in p4src/build/ (ignored by git); the committed
# P4Info only changes on purpose, with `make p4info`.
$(P4_BUILD)/mrc_switch.json: $(P4_SRCS)
	@command -v $(P4C) >/dev/null || { echo "$(P4C) not found: BMv2/p4c come from p4lang's package repository (make setup BMV2=1, see docs/p4-pipeline.md)"; exit 2; }
	mkdir -p $(P4_BUILD)
	$(P4C) --arch v1model --std p4-16 -o $@ --p4runtime-files $(P4_BUILD)/mrc_switch.p4info.txtpb p4src/mrc_switch.p4

# The BMv2 target needs the compiled program: build it wherever p4c is installed, and
# say so where it is not (the Linux SRv6 target needs nothing).
p4-if-present:
	@if command -v $(P4C) >/dev/null; then $(MAKE) --no-print-directory p4; \
	else echo "note: $(P4C) not installed: BMv2 target unavailable, the Linux SRv6 target will be used"; fi

p4-check: p4
	@diff -u p4src/mrc_switch.p4info.txtpb $(P4_BUILD)/mrc_switch.p4info.txtpb \
	  || { echo "p4-check: the committed P4Info differs from p4c's (above); make p4info copies it on purpose"; exit 1; }
	@echo "p4-check: the committed P4Info is byte-identical to p4c's"

p4info: p4
	cp $(P4_BUILD)/mrc_switch.p4info.txtpb p4src/mrc_switch.p4info.txtpb
	@echo "p4src/mrc_switch.p4info.txtpb now holds p4c's P4Info: review the diff before committing"

# Only what crashed runs left behind (processes, links, sockets) and old run directories;
# never build output or caches (p4src/build, .pytest_cache, .ruff_cache).
KEEP_RUNS ?=
RUNS_MAX_MB ?=
clean:
	$(PY) -m topologies.cleanup --runs $(RUN_DIR) $(if $(KEEP_RUNS),--keep $(KEEP_RUNS),) $(if $(RUNS_MAX_MB),--max-mb $(RUNS_MAX_MB),)

# The VM check (docs/testbed.md, "The VM"): root, QEMU, debootstrap; the host's Python only (the
# runner needs nothing but the standard library). Under TCG it takes an hour or more: nice.
VM_SUITE ?= linux
VM := nice -n 10 $(SYSTEM_PYTHON) -m mrc_vm.cli
vm-deps:
	@WITH_VM=1 ./scripts/install-system-deps.sh

vm-image: vm-deps
	$(VM) build

vm-test: vm-deps
	$(VM) test --suite $(VM_SUITE)

vm-box: vm-deps
	$(VM) box

vm-clean:
	$(SYSTEM_PYTHON) -m mrc_vm.cli clean
