#!/usr/bin/env bash
# `make test-debian13`: runs a command (default `make test PYTHON=python3`) on Debian 13
# (trixie: Elixir 1.18, OTP 27, Python 3.13) in a chroot, as root.
#
# The chroot is built once with debootstrap into $DEBIAN13_ROOT (default ../debian13-root,
# beside the repository) and reused. The host's pip configuration and CA certificates are
# copied in, so pip reaches the registry as on the host. The repository travels as a copy in
# $DEBIAN13_ROOT/nx_jax: HEAD, the uncommitted changes and the untracked files that git does
# not ignore; the copy keeps its own build outputs (_build, .venv) between runs, so the
# host's are never touched. Real Nx's sources (../shared/reference's tarballs, and Nx 0.9.2
# from a clone of Nx's repository where the host has one) are copied to /shared/reference, so
# the copy's `make test-real-nx` finds them as on the host.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root=$(realpath -m "${DEBIAN13_ROOT:-$repo/../debian13-root}")
mirror=${DEBIAN13_MIRROR:-http://deb.debian.org/debian}
packages="elixir erlang-dev python3 python3-venv python3-pip make gcc libc6-dev git ca-certificates"
[ $# -gt 0 ] || set -- make test PYTHON=python3

[ "$(id -u)" = 0 ] || { echo "tools/debian13.sh needs root (debootstrap, chroot, mount)" >&2; exit 2; }
command -v debootstrap >/dev/null || apt-get install -y -q debootstrap

# Mounts, undone on any exit; processes left in the chroot (epmd) are ended first, by pid.
mounts=()
cleanup() {
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill "${p#/proc/}" 2>/dev/null
  done
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -R "${mounts[i]}" 2>/dev/null || umount -R -l "${mounts[i]}" || true
  done
}
trap cleanup EXIT
mount_in() { # mount_in TARGET MOUNT-ARGS...
  local target=$root/$1; shift
  mountpoint -q "$target" && return
  mount "$@" "$target" && mounts+=("$target")
}

[ -e "$root/etc/os-release" ] || debootstrap --variant=minbase trixie "$root" "$mirror"
mount_in proc -t proc proc
mount_in dev --rbind /dev && mount --make-rslave "$root/dev"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

in_root() { chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  DEBIAN_FRONTEND=noninteractive ${NX_JAX_TEST_TIME_SCALE:+NX_JAX_TEST_TIME_SCALE=$NX_JAX_TEST_TIME_SCALE} \
  "$@"; }

if [ "$(cat "$root/.nx_jax-packages" 2>/dev/null)" != "$packages" ]; then
  in_root apt-get update -q
  in_root apt-get install -y -q --no-install-recommends $packages
  echo "$packages" > "$root/.nx_jax-packages"
fi
# The host's extra CA certificates and pip configuration, as they are now.
if [ -d /usr/local/share/ca-certificates ]; then
  cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
  in_root update-ca-certificates >/dev/null
fi
for f in /etc/pip.conf /etc/xdg/pip /root/.config/pip; do
  [ -e "$f" ] && mkdir -p "$root$(dirname "$f")" && cp -r "$f" "$root$(dirname "$f")/"
done

# The copy: reset to HEAD, stale files removed (ignored build outputs kept), then the
# working tree's changes on top.
dst=$root/nx_jax
[ -d "$dst/.git" ] || git init -q "$dst"
git -C "$dst" fetch -q "$repo" HEAD
git -C "$dst" reset -q --hard FETCH_HEAD
git -C "$dst" clean -q -fd
git -C "$repo" diff --quiet HEAD || git -C "$repo" diff --binary HEAD | git -C "$dst" apply
git -C "$repo" ls-files -z -o --exclude-standard | tar -C "$repo" --null -T - -cf - | tar -C "$dst" -xf -

# Real Nx's sources, where the copy's Makefile looks for them (REFERENCE, ../shared/reference):
# the host's reference tarballs (Nx 0.7.2, complex, telemetry), and Nx 0.9.2 from a clone of
# Nx's repository (NX_GIT, default ../.mirror/elixir-nx+nx/repo) when the host has one.
reference=$(realpath -m "${REFERENCE:-$repo/../shared/reference}")
nx_git=${NX_GIT:-$repo/../.mirror/elixir-nx+nx/repo}
mkdir -p "$root/shared/reference"
[ -d "$reference" ] && cp "$reference"/*.tar.gz "$root/shared/reference/"
if [ ! -f "$root/shared/reference/nx-0.9.2.tar.gz" ] &&
  git -C "$nx_git" rev-parse -q --verify 'v0.9.2^{commit}' >/dev/null 2>&1; then
  git -C "$nx_git" archive --prefix=nx-0.9.2/ v0.9.2 nx | gzip > "$root/shared/reference/nx-0.9.2.tar.gz"
fi

echo "==> Debian $(cat "$root/etc/debian_version") in $root: $*"
in_root /bin/sh -c 'cd /nx_jax && exec "$@"' sh "$@"
