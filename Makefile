# vramplan — two commands: `make run` (set up and start) and `make test` (set up and test).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test test-fast install dev-install lint migrate catalog worker bench-speed bench-accuracy schema clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "vramplan needs Python >= 3.11, found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	@touch $@

# torch 2.13.0 first, by exact version: the synthetic acceptance workload's tests run it on the CPU, and an
# exact pin takes the CPU build this machine kind keeps on disk instead of a multi-GB CUDA download.
$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet 'torch==2.13.0'
	$(BIN)/pip install --quiet -e '.[dev,node]'
	@touch $@ $(VENV)/.installed

# make run's local worker runs acceptance jobs, whose synthetic workload is PyTorch: the service plus the node extra,
# with torch 2.13.0's CPU build (PyTorch's CPU index; a machine that cannot reach it takes the pin
# from its own package index, as dev-install does).
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
$(VENV)/.run-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet 'torch==2.13.0' --index-url $(TORCH_CPU_INDEX) \
		|| $(BIN)/pip install --quiet 'torch==2.13.0'
	$(BIN)/pip install --quiet -e '.[node]'
	@touch $@ $(VENV)/.installed

install: $(VENV)/.installed

dev-install: $(VENV)/.dev-installed

## make run: a fresh machine with Python >= 3.11 and make → API, admin and one local Celery worker (with torch, CPU).
run: $(VENV)/.run-installed
	@DJANGO_DEBUG=$${DJANGO_DEBUG:-1} HOST=$(HOST) PORT=$(PORT) BIN=$(BIN) ./scripts/run.sh

## make test: ruff (lint and format), the import-linter contract, mypy, then pytest (PostgreSQL/Redis when DATABASE_URL/CELERY_BROKER_URL say so).
test: dev-install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	DJANGO_SECRET_KEY=$${DJANGO_SECRET_KEY:-test-only-not-a-secret} $(BIN)/mypy
	DJANGO_SECRET_KEY=$${DJANGO_SECRET_KEY:-test-only-not-a-secret} $(BIN)/python -m pytest; \
	  rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing on purpose"; exit 1; fi; exit $$rc

## make test-fast: the inner loop: pytest without the `slow` tests (processes, real workers, compiling, fuzzing); no lint.
test-fast: dev-install
	DJANGO_SECRET_KEY=$${DJANGO_SECRET_KEY:-test-only-not-a-secret} $(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS); \
	  rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing on purpose"; exit 1; fi; exit $$rc

lint: dev-install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	DJANGO_SECRET_KEY=$${DJANGO_SECRET_KEY:-test-only-not-a-secret} $(BIN)/mypy

## make catalog: rebuild fixtures/catalog from fixtures/source (fails if the committed files are stale), then load it.
catalog: install
	$(BIN)/python fixtures/build_catalog.py --check
	DJANGO_DEBUG=$${DJANGO_DEBUG:-1} $(BIN)/python manage.py loadcatalog

schema: install
	DJANGO_DEBUG=1 $(BIN)/python manage.py spectacular --validate --fail-on-warn --file var/openapi.yaml

bench-speed: install
	$(BIN)/python -m benchmarks.speed.estimate_speed

bench-accuracy: install
	$(BIN)/pip install --quiet 'torch==2.13.0' && $(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m benchmarks.accuracy

clean:
	rm -rf var $(VENV)
