# airmirror: every target sets itself up from scratch on a fresh machine.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export AIRMIRROR_HOME ?= $(CURDIR)/.airmirror
export PYSPARK_PYTHON := $(CURDIR)/$(PY)

.PHONY: setup demo stop test unit lint bench soak clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml constraints.txt scripts/install.sh
	scripts/install.sh $(VENV)
	touch $(STAMP)

demo: setup
	$(PY) -m airmirror.devtools.demo

stop: setup
	$(PY) -m airmirror.devtools.demo stop

# The suite runs in three pytest-xdist workers, each with its own session clusters and Spark session (--dist
# loadscope keeps a module and its module-scoped clusters on one worker). The 2 cores are busy throughout; a third
# worker fills the moments the others wait on brokers, Airflow or Spark: about 28 minutes on 2 cores.
# TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 3
test: setup
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadscope --durations=40

unit: setup
	$(VENV)/bin/pytest -q tests/unit

# ruff (rules and excludes) and mypy (strict, over include/airmirror and benchmarks) take their settings from pyproject.toml
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: setup
	$(PY) benchmarks/bench.py $(BENCH_ARGS)

soak: setup
	$(PY) benchmarks/soak.py $(SOAK_ARGS)

clean:
	rm -rf $(VENV) .airmirror
