# nx_jax: two commands for a new user.
#   make demo   installs what is missing, then runs examples/grad_helpers.exs
#   make test   installs what is missing, then runs pytest and ExUnit
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
# Every pip install takes its versions from this file (see its header; `make lock` refreshes it).
LOCK := requirements.lock
PIP := $(VPY) -m pip install -q -c $(LOCK)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps elixir python-deps compile demo test pytest exunit lint clean lock nx-suite \
	compile-real-nx test-real-nx test-debian13 test-debian13-real-nx serving-suite test-seam

deps: elixir python-deps compile

elixir:
	@command -v elixir >/dev/null 2>&1 || { \
	  echo "==> installing Elixir and Erlang from apt"; \
	  $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q elixir erlang-dev; }

# pip, setuptools and wheel come from the lock too: the editable install is built without
# build isolation, so no unpinned setuptools is fetched for it.
$(VENV)/.installed: pyproject.toml $(LOCK)
	@[ -x $(VPY) ] || $(PYTHON) -m venv $(VENV)
	$(PIP) pip setuptools wheel
	$(PIP) --no-build-isolation -e '.[test]'
	@touch $@

python-deps: $(VENV)/.installed

compile: elixir
	mix compile

demo: deps
	mix run examples/grad_helpers.exs

pytest: python-deps
	$(VPY) -m pytest -q tests

exunit: deps
	(cd nx && mix test)
	mix test

# nx_jax against real Nx instead of the clean room (the switch NX_JAX_NX of mix.exs): Nx,
# complex and telemetry from REFERENCE, compiled offline by tools/build-real-nx.sh into REAL_NX
# (about a minute, once), then nx_jax's runtime with warnings as errors, into _build/real_nx
# (_build/real_nx-VERSION for another version). REAL_NX_VERSION=0.9.2 takes Nx 0.9.2 (Elixir
# >= 1.15: the Debian 13 chroot) from REFERENCE/nx-0.9.2.tar.gz or a clone of Nx's repository
# (NX_GIT, tools/build-real-nx.sh). What compiles there: docs/ARCHITECTURE.md, "Two projects".
REFERENCE ?= ../shared/reference
REAL_NX_VERSION ?= 0.7.2
REAL_NX ?= $(if $(filter 0.7.2,$(REAL_NX_VERSION)),_build/real-nx-src,_build/real-nx-$(REAL_NX_VERSION))
REAL_NX_BUILT := $(REAL_NX)/nx-$(REAL_NX_VERSION)/nx/_build
BUILD_REAL_NX := REFERENCE=$(REFERENCE) bash tools/build-real-nx.sh $(REAL_NX_VERSION) $(REAL_NX)
compile-real-nx: elixir
	@[ -d $(REAL_NX_BUILT) ] || $(BUILD_REAL_NX)
	NX_JAX_NX=$(REAL_NX) mix compile --warnings-as-errors

# nx_jax's tests under real Nx (test_real_nx/: NxJax as real Nx's compiler, each result
# compared with real Nx's own evaluator); under a minute once real Nx is built. Without the
# sources of real Nx (REFERENCE) it says so and skips.
test-real-nx: deps
	@if [ -d $(REAL_NX_BUILT) ] || [ -f $(REFERENCE)/complex-0.5.0.tar.gz ]; then \
	  [ -d $(REAL_NX_BUILT) ] || $(BUILD_REAL_NX) || exit 1; \
	  NX_JAX_NX=$(REAL_NX) MIX_ENV=test mix test; \
	else \
	  echo "test-real-nx SKIPPED: no real Nx $(REAL_NX_VERSION) at $(REAL_NX) and no sources in $(REFERENCE)"; \
	fi

# Nx 0.7.2's own tests of Nx.Serving and Nx.Batch (test/nx/serving_test.exs, batch_test.exs),
# unchanged, under real Nx 0.7.2 with NxJax the default compiler, the distributed ones on two
# peer nodes with pools of their own (test_real_nx/serving_suite/run.exs; not CI; under a
# minute). SERVING_SUITE_DEFAULT=options makes NxJax the default through the default options
# instead (docs/COMPATIBILITY.md, "Nx.Serving under real Nx", says what differs).
SERVING_SUITE_DEFAULT ?= evaluator
serving-suite: deps compile-real-nx
	SERVING_SUITE_DEFAULT=$(SERVING_SUITE_DEFAULT) NX_JAX_NX=$(REAL_NX) \
	  mix run --no-start test_real_nx/serving_suite/run.exs

# The tests of test_elixir/ tagged :seam with a second compiler, NxJax.Test.SeamCompiler (pure
# Elixir, on the binary backend), the default one: the front end runs them knowing no JAX, and
# no defn of theirs calls into nx_jax's runtime (test_elixir/support/seam_run.ex; under a
# minute: only the files with a tagged test are loaded). Its own summary line: "seam run: N of N
# tagged tests ran defn through ...".
test-seam: deps
	NX_JAX_TEST_COMPILER=seam mix test $$(grep -l -E '@(module)?tag :seam' test_elixir/*_test.exs)

# The five suites always run (the worker's pytest, the clean-room Nx's own tests in nx/, which
# need no Python, nx_jax's ExUnit, its tests tagged :seam under the seam compiler, test-seam,
# and nx_jax's ExUnit under real Nx, test-real-nx), so every summary line is printed; the
# target fails if any failed.
test: deps
	@rc=0; \
	$(VPY) -m pytest -q tests || rc=1; \
	(cd nx && mix test) || rc=1; \
	mix test || rc=1; \
	$(MAKE) --no-print-directory test-seam || rc=1; \
	$(MAKE) --no-print-directory test-real-nx || rc=1; \
	exit $$rc

# `make test` on Debian 13 (Elixir 1.18, OTP 27, Python 3.13) in a chroot that tools/debian13.sh
# builds once beside the repository (root; not part of CI: README "Versions" says how long),
# then the tests of test_real_nx/ under real Nx 0.9.2 there too. test-debian13-real-nx runs only
# test_real_nx/, under real Nx 0.7.2 and 0.9.2.
DEBIAN13_REAL_NX := make test-real-nx PYTHON=python3 REAL_NX_VERSION=0.9.2
test-debian13:
	bash tools/debian13.sh sh -c 'rc=0; make test PYTHON=python3 || rc=1; \
	  $(DEBIAN13_REAL_NX) || rc=1; exit $$rc'

test-debian13-real-nx:
	bash tools/debian13.sh sh -c 'rc=0; make test-real-nx PYTHON=python3 || rc=1; \
	  $(DEBIAN13_REAL_NX) || rc=1; exit $$rc'

# Both projects compile without a warning (forced: a module compiled before would not warn
# again), nx_jax with its test support; on Debian 12 and 13 alike (Elixir 1.14 and 1.18).
lint: python-deps compile-real-nx
	$(VPY) -m ruff check py_backend tests conformance bench
	$(VPY) -m mypy py_backend conformance
	@# (the formatter's output changes between Elixir versions: the code is formatted by the
	@# Elixir of Debian 12, 1.14, and checked only there; other versions check the compiles)
	@if elixir -e 'System.halt(if Version.match?(System.version(), "~> 1.14.0"), do: 0, else: 1)'; \
	  then mix format --check-formatted; \
	  else echo "mix format --check-formatted skipped: Elixir $$(elixir -e 'IO.write(System.version())'), formatted by 1.14"; fi
	cd nx && mix compile --force --warnings-as-errors
	MIX_ENV=test mix compile --force --warnings-as-errors

clean:
	rm -rf _build $(VENV)

# Benchmarks (not part of `make test`, never run by CI): a few minutes; writes docs/BENCHMARKS.md.
.PHONY: bench bench-plots bench-mechanisms bench-layers bench-while bench-checkpoint bench-train \
	bench-real-nx bench-serving bench-timeline
bench: deps
	$(PIP) --no-build-isolation -e '.[bench]'
	mix run bench/run.exs

# docs/plots/ (the pictures in docs/BENCHMARKS.md): latency, transfer and pool data, then PNGs
# drawn by bench/plots.py with matplotlib (the bench extra); about 1 minute
bench-plots: deps
	$(PIP) --no-build-isolation -e '.[bench]'
	mix run bench/plots.exs

# docs/BENCHMARKS.md "Latency mechanisms" and its reading (sections 8 and 9): each latency
# mechanism switched off, quiet and with a CPU hog
bench-mechanisms: deps
	mix run bench/mechanisms.exs

# the small call one client layer at a time, quiet and co-located with a CPU hog (prints its
# table; no section of docs/BENCHMARKS.md regenerates it)
bench-layers: deps
	mix run bench/layers.exs

# reverse mode through unbounded while loops: time per iteration for n = 10 .. 10,000
bench-while: python-deps
	$(VPY) bench/while_grad.py

# section 12 of docs/BENCHMARKS.md: a training loop against its twin in-process in JAX, its
# memory over 10,000 steps, and the numerics modes; about 3 minutes
bench-train: deps
	mix run bench/train_loop.exs 500 3 10000

# section 15 of docs/BENCHMARKS.md: the training step of section 12 timed at each hand-over
# between the caller, the worker's GenServer, the pipe and the Python worker (NxJax.Timeline's
# marks, compiled in by NX_JAX_TIMELINE=1: the modules that hold them recompile, here and again
# at the next build without it), then with a normal worker and with no BEAM (bench/pipe_floor.py),
# each against the in-process step in alternating blocks; about 4 minutes
bench-timeline: deps
	NX_JAX_TIMELINE=1 mix run bench/step_timeline.exs 500 3

# section 13 of docs/BENCHMARKS.md: the small call and the training loop under real Nx 0.7.2
# (NxJax its compiler) and under the clean room, the two builds run by turns, against the
# training step in-process in JAX; about 6 minutes
bench-real-nx: deps compile-real-nx
	REAL_NX=$(REAL_NX) elixir bench/real_nx.exs 4 500

# section 14 of docs/BENCHMARKS.md: a served MLP under real Nx 0.7.2 (Nx.Serving, NxJax the
# compiler) against the direct call, for 1, 8 and 64 clients, and the serving on a second node;
# 2 rounds of 1 s per configuration, about 2 minutes
bench-serving: deps compile-real-nx
	NX_JAX_NX=$(REAL_NX) mix run --no-start bench/serving.exs 2 1

# "Checkpointing: what it saves, per platform" in docs/BENCHMARKS.md: JAX only, about 2 minutes
bench-checkpoint: python-deps
	$(VPY) bench/checkpoint_memory.py --passes

# Resolve pyproject.toml's dependencies and extras again, newest versions, in a scratch venv,
# and write them to $(LOCK) (keeping its header). On purpose only: then `make test`, commit.
LOCK_VENV := .venv-lock
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --upgrade pip setuptools wheel
	$(LOCK_VENV)/bin/python -m pip install -q --no-build-isolation -e '.[test,bench]'
	{ grep '^#' $(LOCK); $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf $(LOCK_VENV)
	@echo "wrote $(LOCK); run make test, then commit it"

# Nx v0.7.2's own test files, unchanged, against our front end (nx/nx_suite/README.md; not CI).
nx-suite: deps
	@[ -n "$(NX_SRC)" ] || { echo "set NX_SRC to the nx/ folder of an Nx v0.7.2 checkout"; exit 2; }
	NX_SRC=$(NX_SRC) MIX_ENV=nx_suite mix run nx/nx_suite/run.exs
