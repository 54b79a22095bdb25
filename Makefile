# worldline: `make demo` and `make test` do all set-up themselves (idempotently) on a fresh Debian machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_OUT ?= out/demo
PYTEST_ARGS ?=
# tests only, installed without their GPU requirements (pyproject's `trainers` extra holds what they import)
TRAINERS_NO_DEPS := 'llamafactory==0.9.5' 'verl==0.9.1'
# MiniWoB++'s task pages (its html/ folder) for `tasks import miniwob` and the browser tests; its
# Selenium and Gymnasium requirements are not needed for that.
PAGES_NO_DEPS := 'miniwob==1.1.0'

export CONTAINERS_CONF := $(CURDIR)/infra/containers.conf

.PHONY: help setup system venv engine images backends demo test lint typecheck pytest pytest-fast bench clean

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

setup: system venv engine images backends  ## everything below, idempotently

system:  ## system packages (podman, runc, debootstrap, ...) via infra/install-system.sh
	bash infra/install-system.sh

venv: $(STAMP)  ## the virtualenv in .venv with worldline and its dev tools

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,trainers]'
	$(BIN)/python -m pip install -q --no-deps $(TRAINERS_NO_DEPS) $(PAGES_NO_DEPS)
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

engine:  ## start the project-local Podman Docker-API service
	bash infra/engine.sh start

images:  ## build the sandbox base images offline (cached)
	bash infra/build-images.sh

backends: venv  ## MCP servers, their sandbox image, the local search index (mcp / search domains; offline, cached)
	bash infra/install-mcp-servers.sh
	bash infra/build-mcp-image.sh
	bash infra/build-search-index.sh
	bash infra/build-desktop-image.sh
	bash infra/build-browser-image.sh
	bash infra/install-airflow.sh

demo: setup  ## run the main job on the bundled data: collect, clean, build and verify pools
	$(BIN)/worldline demo --out $(DEMO_OUT)

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck:
	$(BIN)/mypy

pytest:
	$(BIN)/pytest -q $(PYTEST_ARGS)

test: setup lint typecheck pytest  ## ruff, mypy and the whole pytest suite (slow suites included)

pytest-fast: venv  ## the suite without the slow marks (for quick local iterations)
	$(BIN)/pytest -q -m 'not slow' $(PYTEST_ARGS)

bench: venv  ## run every benchmark (prints ratios against baselines measured in the same run)
	for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:  ## remove build outputs (keeps .venv and cached images)
	rm -rf out .pytest_cache .mypy_cache .ruff_cache .hypothesis
