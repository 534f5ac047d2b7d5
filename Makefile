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

# Two pytest-xdist workers, each with its own session clusters and Spark session; --dist loadscope keeps each
# module (and the clusters its module-scoped fixtures start) on one worker.  About 26 minutes on 2 cores.
test: setup
	$(VENV)/bin/pytest -q -n 2 --dist loadscope --durations=40

unit: setup
	$(VENV)/bin/pytest -q tests/unit

bench: setup
	$(PY) benchmarks/bench.py $(BENCH_ARGS)

soak: setup
	$(PY) benchmarks/soak.py $(SOAK_ARGS)

clean:
	rm -rf $(VENV) .airmirror
