# airmirror: every target sets itself up from scratch on a fresh machine.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export AIRMIRROR_HOME ?= $(CURDIR)/.airmirror
export PYSPARK_PYTHON := $(CURDIR)/$(PY)

.PHONY: setup demo stop test unit bench clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	# the Spark provider's pyspark-client overwrites pyspark's Python files with an older copy: restore them
	$(PY) -m pip install -q --force-reinstall --no-deps pyspark==4.3.0
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -c "from airmirror.devtools.local_kafka.jars import kafka_classpath; kafka_classpath()"
	touch $(STAMP)

demo: setup
	$(PY) -m airmirror.devtools.demo

stop: setup
	$(PY) -m airmirror.devtools.demo stop

test: setup
	$(VENV)/bin/pytest -q

unit: setup
	$(VENV)/bin/pytest -q tests/unit

bench: setup
	$(PY) benchmarks/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .airmirror
