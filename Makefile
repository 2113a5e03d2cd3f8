# make run: set up, then start Airflow + a sample event trickle (Ctrl-C stops everything).
# make test: set up, then run the whole test suite. Both are idempotent.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# Test processes (pytest-xdist), each with its own SparkSession; 2 suits 2 cores and 8 GiB.
TEST_WORKERS ?= 2
BENCH_ARGS ?=
UV_VERSION := 0.9.30
# The example pipelines, unless you name your own folders (`lakehouse` reads the same setting).
export LAKEHOUSE_PIPELINES ?= $(CURDIR)/examples

.PHONY: bytecode platform-cache setup run run-cluster stop test test-fast lint bench bench-smoke docs reference clean check-tools

setup: check-tools $(VENV)/.installed platform-cache .airflow/.migrated bytecode

# The platform's own modules compiled too (about 0.2 s per process; up to date in a blink).
bytecode: $(VENV)/.installed
	@$(PY) -m compileall -q spark_jobs plugins dags include examples bench >/dev/null

check-tools:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "error: Python 3.11+ is needed (found " + sys.version.split()[0] + "): install it and run make again")'
	@command -v java >/dev/null || { echo "error: Java 17+ is not on PATH: install it (e.g. apt-get install openjdk-17-jre-headless)"; exit 2; }

# uv installs the pinned requirements (the same wheels pip would) in about a third of pip's time.
# --compile-bytecode: unlike pip, uv leaves the modules uncompiled, and a process that may not
# write __pycache__ ($PYTHONDONTWRITEBYTECODE, as in CI; a read-only image) compiles every module
# it imports each time it starts: each Airflow task and each `lakehouse` command paid 1-2.5 s of
# CPU for it (importing Airflow 4.1 s -> 1.8 s, PySpark with pandas 1.8 s -> 0.6 s).
$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q uv==$(UV_VERSION)
	$(VENV)/bin/uv pip install --python $(PY) -q --compile-bytecode -r requirements.txt
	$(VENV)/bin/uv pip install --python $(PY) -q --no-deps -e .
	touch $@

# `lakehouse setup`: Delta's jars resolved once with Maven into the user's cache
# (~/.cache/lakehouse, or $LAKEHOUSE_CACHE), then the Spark drivers' class-data sharing archive
# (about 45 s once): every job starts about 4 s sooner. A second or so when both are there.
platform-cache: $(VENV)/.installed
	@$(VENV)/bin/lakehouse setup

.airflow/.migrated: $(VENV)/.installed
	$(PY) include/scripts/lakehouse_platform.py migrate

# `make run LAKE=s3` puts the lake on the embedded S3 server (SeaweedFS on 127.0.0.1) instead of .lakehouse/.
# `make run SOURCE=kafka` starts a Kafka broker on 127.0.0.1 and feeds every ingest hop from a topic.
# `make run TRIGGER=arrival` runs the stream DAGs when data arrives instead of on their schedules.
run: setup
	$(PY) include/scripts/lakehouse_platform.py run $(if $(LAKE),--lake $(LAKE)) $(if $(SOURCE),--source $(SOURCE)) $(if $(TRIGGER),--trigger $(TRIGGER))

# The production topology as processes on 127.0.0.1 (docker-compose.yaml's, without Docker): the
# lake on the embedded S3 server, every Spark task on a standalone master with two workers.
run-cluster: setup
	$(PY) include/scripts/lakehouse_platform.py run --lake s3 --spark cluster $(if $(SOURCE),--source $(SOURCE)) $(if $(TRIGGER),--trigger $(TRIGGER))

# Stops a platform `make run` started (from another shell), or what one that was killed left.
stop:
	$(PY) include/scripts/lakehouse_platform.py stop

# loadgroup: the tests of one xdist_group share a process (tests/conftest.py names the groups).
test: setup
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# `ruff format` lays the code out (100 columns: pyproject.toml); lint fails on a file it would change.
# The layers' import bans (TID251/TID253) and the complexity limit (C901) in pyproject.toml and
# spark_jobs/{model,logs,control}/ruff.toml.
# Then the test ids must not depend on hash order: pytest-xdist refuses to run when its workers
# collect different ids (a set in a parametrize id once failed CI that way).
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@diff <(PYTHONHASHSEED=1 $(VENV)/bin/pytest --collect-only -q -p no:cacheprovider | grep ::) \
	      <(PYTHONHASHSEED=2 $(VENV)/bin/pytest --collect-only -q -p no:cacheprovider | grep ::) \
	  || { echo "error: test ids differ between hash seeds: give parametrize stable ids"; exit 1; }

# The JVM-free tier, for the edit loop: no SparkSession, no Kafka broker, nothing marked slow.
test-fast: setup
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup -m "not spark and not slow" $(PYTEST_ARGS)

$(VENV)/.docs: docs/requirements.txt $(VENV)/.installed
	$(VENV)/bin/uv pip install --python $(PY) -q -r docs/requirements.txt
	touch $@

# The manual (docs/, MkDocs in strict mode: a broken link or a page left out of the nav fails),
# built into .cache/site/; docs/hooks.py checks the committed reference pages and fills in the benchmark figures.
# The committed reference pages (CLI, settings, spec keys) written again from the code; a test and
# the manual's build fail while they are stale.
reference: $(VENV)/.installed
	$(PY) docs/hooks.py

docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
	@echo "the manual: .cache/site/index.html"

# The benchmark suite (about 44 min on 2 cores): bench/results/latest.{json,md}, PNG charts, and
# bench/runs/<time>.json (kept in the repository: the manual's benchmark figures).
bench: setup
	$(PY) -m bench $(BENCH_ARGS)

# The same suite at tiny sizes (CI runs it after the tests).
bench-smoke: setup
	$(PY) -m bench --smoke $(BENCH_ARGS)

clean:
	rm -rf .airflow .lakehouse .cache/site
