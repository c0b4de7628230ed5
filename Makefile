# Supersede: `make reproduce` (all studies, embedded model, no API key) and `make test`.
# Both create .venv on first use. PROFILE picks configs/<profile>.yaml.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= local
PYTEST_ARGS ?=
BENCH_ARGS ?=

.PHONY: setup test lint bench reproduce report clean-outputs

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

setup: $(VENV)/.installed  ## install everything into .venv

test: setup  ## run the test suite
	$(PY) -m pytest -q $(PYTEST_ARGS)

lint: setup  ## ruff
	$(VENV)/bin/ruff check supersede_lib supersede.py tests notebooks
	$(VENV)/bin/ruff format --check supersede_lib supersede.py tests notebooks

bench: setup  ## speed, overhead and engine benchmarks (not part of `make test`); BENCH_ARGS=--quick for a short run
	$(PY) -m supersede_lib.bench $(BENCH_ARGS)

reproduce: setup  ## execute notebooks 01-07 with papermill for PROFILE
	$(PY) -m supersede_lib.reproduce --profile $(PROFILE)

report: setup  ## write outputs/$(PROFILE)/REPORT.md from the results on disk
	$(PY) -m supersede_lib.report --profile $(PROFILE)
