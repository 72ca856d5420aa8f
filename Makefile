# Two commands do all the set-up: `make run` and `make test` (see README.md).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
PORT    ?= 8501
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev

.PHONY: run test test-fast lint typecheck bench install clean browser-deps

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Re-install only when a requirements file changed (stamps make both targets idempotent and fast).
$(STAMP_RUN): requirements.txt pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

$(STAMP_DEV): requirements.txt requirements-dev.txt pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@ $(STAMP_RUN)

install: $(STAMP_RUN)

run: $(STAMP_RUN)
	$(BIN)/streamlit run app.py --server.port $(PORT)

# Chromium for the browser tests comes from Debian (never `playwright install`: no downloads here).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
	  else sudo apt-get update -q && sudo apt-get install -y -q chromium; fi; }

# The random widget walk takes 15 steps per page and data source here (the walk seeds reach the known crash
# paths within 14 steps); MDP_WALK_STEPS=40 (the acceptance walk) or 2000 runs a longer one.
MDP_WALK_STEPS ?= 15
export MDP_WALK_STEPS

test: $(STAMP_DEV) browser-deps typecheck
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q

test-fast: $(STAMP_DEV)
	$(BIN)/python -m pytest -n 2 -q -m "not browser and not slow"

lint: $(STAMP_DEV) typecheck
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy over the core (settings in pyproject.toml); part of `make test`, so CI runs it too.
typecheck: $(STAMP_DEV)
	$(BIN)/mypy

bench: $(STAMP_DEV)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
