# nx_jax: two commands for a new user.
#   make demo   installs what is missing, then runs examples/grad_helpers.exs
#   make test   installs what is missing, then runs pytest and ExUnit
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps elixir python-deps compile demo test pytest exunit lint clean

deps: elixir python-deps compile

elixir:
	@command -v elixir >/dev/null 2>&1 || { \
	  echo "==> installing Elixir and Erlang from apt"; \
	  $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q elixir erlang-dev; }

$(VENV)/.installed: pyproject.toml
	@[ -x $(VPY) ] || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test]'
	@touch $@

python-deps: $(VENV)/.installed

compile: elixir
	mix compile

demo: deps
	mix run examples/grad_helpers.exs

pytest: python-deps
	$(VPY) -m pytest -q tests

exunit: deps
	mix test

# Both suites always run, so both summary lines are printed; the target fails if either failed.
test: deps
	@rc=0; \
	$(VPY) -m pytest -q tests || rc=1; \
	mix test || rc=1; \
	exit $$rc

lint: python-deps
	$(VPY) -m ruff check py_backend tests conformance bench
	$(VPY) -m mypy py_backend conformance
	mix format --check-formatted

clean:
	rm -rf _build $(VENV)

# Benchmarks (not part of `make test`, never run by CI): a few minutes; writes docs/BENCHMARKS.md.
.PHONY: bench
bench: deps
	$(VPY) -m pip install -q -e '.[bench]'
	mix run bench/run.exs
