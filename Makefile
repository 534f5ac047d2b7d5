# airmirror: every target sets itself up from scratch on a fresh machine.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export AIRMIRROR_HOME ?= $(CURDIR)/.airmirror
export PYSPARK_PYTHON := $(CURDIR)/$(PY)

.PHONY: setup demo stop test unit bench soak clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml constraints.txt scripts/install.sh
	scripts/install.sh $(VENV)
	touch $(STAMP)

demo: setup
	$(PY) -m airmirror.devtools.demo

stop: setup
	$(PY) -m airmirror.devtools.demo stop

test: setup
	$(VENV)/bin/pytest -q --durations=40

unit: setup
	$(VENV)/bin/pytest -q tests/unit

bench: setup
	$(PY) benchmarks/bench.py $(BENCH_ARGS)

soak: setup
	$(PY) benchmarks/soak.py $(SOAK_ARGS)

clean:
	rm -rf $(VENV) .airmirror
