#!/usr/bin/env bash
# Real Nx of a given version, compiled offline into DIR, for nx_jax's tests under real Nx
# (`make test-real-nx REAL_NX_VERSION=...`); the sibling of ../shared/reference/build-real-nx.sh,
# which builds 0.7.2 only.
#
# Usage: tools/build-real-nx.sh VERSION DIR   -> DIR/nx-VERSION/nx is a compiled mix project
#
# The sources come from REFERENCE (default ../shared/reference beside the repository):
# nx-VERSION.tar.gz (a folder nx-VERSION/ holding nx/), complex-0.5.0.tar.gz and
# telemetry-1.2.1.tar.gz. Where REFERENCE has no nx-VERSION.tar.gz and NX_GIT names a clone
# of github.com/elixir-nx/nx, the tag vVERSION's nx/ folder is taken from it. Nx 0.7 and 0.9
# both depend on complex ~> 0.5 and telemetry ~> 0.4 or ~> 1.0: they become path
# dependencies; ex_doc is dropped and lock files are removed. Nx 0.9 needs Elixir >= 1.15.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
version=${1:?usage: tools/build-real-nx.sh VERSION DIR}
dir=${2:?usage: tools/build-real-nx.sh VERSION DIR}
reference=$(realpath -m "${REFERENCE:-$repo/../shared/reference}")
nx_git=${NX_GIT:-$repo/../.mirror/elixir-nx+nx/repo}

mkdir -p "$dir" && cd "$dir"
rm -rf "nx-$version" complex-0.5.0 telemetry-1.2.1
if [ -f "$reference/nx-$version.tar.gz" ]; then
  tar -xzf "$reference/nx-$version.tar.gz"
elif git -C "$nx_git" rev-parse -q --verify "v$version^{commit}" >/dev/null 2>&1; then
  mkdir "nx-$version"
  git -C "$nx_git" archive "v$version" nx | tar -x -C "nx-$version"
else
  echo "tools/build-real-nx.sh: no $reference/nx-$version.tar.gz and no tag v$version in" \
    "NX_GIT=$nx_git" >&2
  exit 2
fi
for f in complex-0.5.0 telemetry-1.2.1; do tar -xzf "$reference/$f.tar.gz"; done

# (sed, not python: the Debian 13 chroot runs this before any virtual environment exists)
sed -E -i \
  -e 's|\{:complex, "[^"]*"\}|{:complex, path: "../../complex-0.5.0", override: true}|' \
  -e 's|\{:telemetry, "[^"]*"\}|{:telemetry, path: "../../telemetry-1.2.1", override: true}|' \
  -e '/\{:ex_doc, /d' \
  "nx-$version/nx/mix.exs"
sed -E -i -e '/\{:(ex_doc|dialyxir), /d' complex-0.5.0/mix.exs
rm -f "nx-$version/nx/mix.lock" complex-0.5.0/mix.lock telemetry-1.2.1/mix.lock
# (NO_COMPILE=1: unpack only, where this Elixir is too old for VERSION)
[ -n "${NO_COMPILE:-}" ] || (cd "nx-$version/nx" && MIX_ENV=${MIX_ENV:-dev} mix compile)
