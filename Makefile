# MRC testbed. `./run.sh <target>` installs system packages first; `make <target>` assumes they are there.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
SYSTEM_PYTHON ?= /usr/bin/python3
RUN_DIR ?= runs
PYTEST_ARGS ?=

.PHONY: setup test demo bench cli lint clean p4 help

help:
	@echo "setup  venv with the project (can import Debian's mininet)"
	@echo "demo   MRC surviving faults (see README)"
	@echo "test   unit, integration (root) and BMv2 tests"
	@echo "bench  benchmarks: JSON + PNG under results/"
	@echo "cli    Mininet CLI on the default fabric"
	@echo "p4     compile p4src/ with p4c-bm2-ss (where p4c exists)"
	@echo "lint   ruff"
	@echo "clean  remove what a crashed run left behind"

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(SYSTEM_PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

demo: setup
	$(PY) -m mrc_host.sim.demo

bench: setup
	$(PY) -m bench.run_all $(if $(QUICK),--quick,)

cli: setup
	@echo "The Mininet testbed arrives with the topology issue; meanwhile: make demo" >&2; exit 2

lint: setup
	$(VENV)/bin/ruff check .

p4:
	@command -v p4c-bm2-ss >/dev/null || { echo "p4c-bm2-ss not found: BMv2/p4c come from p4lang's package repository (see README)"; exit 2; }
	mkdir -p p4src/build
	p4c-bm2-ss --arch v1model -o p4src/build/mrc_switch.json --p4runtime-files p4src/build/mrc_switch.p4info.txtpb p4src/mrc_switch.p4

clean:
	-$(PY) -m topologies.cleanup 2>/dev/null || true
	rm -rf .pytest_cache .ruff_cache p4src/build
