#!/usr/bin/env bash
# Packs what bench/pool_scaling.exs (or any bench script) needs on a larger machine that has a
# Python with JAX but no Erlang/Elixir and no network (the lent accelerator machine): this
# machine's Erlang/OTP and Elixir trees, erlang-py, and two shared libraries Erlang links
# against. Writes .devkit/ (ignored by git via .git/info/exclude). On the other machine, from
# the repository root (JAX on its CPU, as in docs/BENCHMARKS.md section 5):
#
#   (ldconfig -p | grep -q libtinfo.so.6) || export LD_LIBRARY_PATH=$PWD/.devkit/lib
#   tar xzf .devkit/erl.tgz -C / && export PYTHONPATH=$PWD/.devkit/py \
#     NX_JAX_PYTHON=$(command -v python3) JAX_PLATFORMS=cpu HOME=/tmp/home && mkdir -p $HOME
#   mix compile && mix run bench/pool_scaling.exs bench/pool_scaling.md
set -euo pipefail
cd "$(dirname "$0")/.."
site=$(.venv/bin/python -c 'import erlang, os; print(os.path.dirname(erlang.__file__))')
mkdir -p .devkit/py .devkit/lib
grep -qx '/.devkit/' .git/info/exclude 2>/dev/null || echo '/.devkit/' >> .git/info/exclude
cp "$site/erlang.py" .devkit/py/
cp -r "$site"/erlang_py-*.dist-info .devkit/py/
for lib in libtinfo.so.6 libz.so.1; do
  cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')" .devkit/lib/
done
tar czf .devkit/erl.tgz -C / usr/lib/erlang usr/lib/elixir \
  usr/bin/erl usr/bin/elixir usr/bin/mix usr/bin/iex usr/bin/epmd usr/bin/erlc usr/bin/escript
du -sh .devkit
