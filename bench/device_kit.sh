#!/usr/bin/env bash
# The accelerator checks in one command, for a machine that has a Python with JAX for its
# accelerator but no Erlang/Elixir and no network (such as a lent GPU machine):
#
#   bench/device_kit.sh pack            here: packs this machine's Erlang/OTP and Elixir trees,
#                                       erlang-py and two shared libraries Erlang links against
#                                       into .devkit/ (ignored by git via .git/info/exclude)
#   bench/device_kit.sh check [OUT]     there, from the repository root with .devkit/ beside it
#                                       (as root: it unpacks Erlang/Elixir into /): the checks
#                                       of bench/device_checks.exs on the default accelerator,
#                                       the checkpoint memory study (bench/checkpoint_memory.py)
#                                       and the pool scaling bench; reports go to OUT (default
#                                       .devkit/out): device_checks.md, checkpoint.md,
#                                       pool_scaling.md. Exits non-zero if a check failed.
#
# Settings: DEVKIT (the kit's folder, default .devkit); for `check`, PYTHON (default python3:
# the Python that has JAX for the accelerator) and PLATFORM (a JAX platform name; default: the
# one JAX picks first). Every Python process runs with XLA_PYTHON_CLIENT_PREALLOCATE=false, so
# that several of them can share one GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${DEVKIT:-.devkit}

pack() {
  local site
  site=$(.venv/bin/python -c 'import erlang, os; print(os.path.dirname(erlang.__file__))')
  mkdir -p "$kit/py" "$kit/lib"
  [ "$kit" != .devkit ] || grep -qx '/.devkit/' .git/info/exclude 2>/dev/null ||
    echo '/.devkit/' >> .git/info/exclude
  cp "$site/erlang.py" "$kit/py/"
  cp -r "$site"/erlang_py-*.dist-info "$kit/py/"
  for lib in libtinfo.so.6 libz.so.1; do
    cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')" "$kit/lib/"
  done
  tar czf "$kit/erl.tgz" -C / usr/lib/erlang usr/lib/elixir \
    usr/bin/erl usr/bin/elixir usr/bin/mix usr/bin/iex usr/bin/epmd usr/bin/erlc usr/bin/escript
  du -sh "$kit"
}

check() {
  local out=${1:-$kit/out} python=${PYTHON:-python3} rc=0
  [ -f "$kit/erl.tgz" ] || { echo "no $kit/erl.tgz: run 'bench/device_kit.sh pack' first, \
on a machine with Erlang/Elixir and the project's .venv, and bring $kit/ along" >&2; exit 2; }
  kit=$(cd "$kit" && pwd)
  "$python" -c 'import jax' 2>/dev/null || { echo "$python has no JAX: set PYTHON to one that \
has JAX for the accelerator" >&2; exit 2; }
  mkdir -p "$out"
  command -v elixir >/dev/null 2>&1 || tar xzf "$kit/erl.tgz" -C /
  (ldconfig -p | grep -q libtinfo.so.6) || export LD_LIBRARY_PATH=$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # (an absolute path, its links kept: a virtualenv's python is a link that must stay one)
  python=$(command -v "$python"); case $python in /*) ;; *) python=$PWD/$python ;; esac
  export PYTHONPATH=$kit/py${PYTHONPATH:+:$PYTHONPATH} NX_JAX_PYTHON=$python
  export XLA_PYTHON_CLIENT_PREALLOCATE=false HOME=${HOME:-/tmp/home}
  mkdir -p "$HOME"
  "$python" -c 'import jax; print("JAX", jax.__version__, "devices:", jax.devices())'
  mix compile
  mix run bench/device_checks.exs ${PLATFORM:-""} "$out/device_checks.md" || rc=1
  "$python" bench/checkpoint_memory.py --json "$out/checkpoint.json" > "$out/checkpoint.md" || rc=1
  mix run bench/pool_scaling.exs "$out/pool_scaling.md" || rc=1
  echo "reports in $out: $(ls "$out" | tr '\n' ' ')"
  exit $rc
}

case "${1:-}" in
  pack) pack ;;
  check) shift; check "$@" ;;
  *) echo "usage: bench/device_kit.sh pack | check [OUT]   (see the top of this file)" >&2; exit 2 ;;
esac
