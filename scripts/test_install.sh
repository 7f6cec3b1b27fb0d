#!/usr/bin/env bash
# Proof that the wheels install and work where users are: in a Debian 12
# (bookworm) arm64 root file system, run by qemu-user through binfmt, and in
# a Debian 11 (bullseye) amd64 one (glibc 2.31, Python 3.9). In each, in a
# mount namespace of its own with /proc, /dev and a tmpfs /tmp mounted (and
# unmounted again, whatever happens), a non-root user creates a venv, runs
# `pip install --no-index --find-links <dist> davincirunsdk` and then
# tests/install/install_check.py: real 2-rank jobs through `davincirun` and
# the Python API, a failing rank among them, every error type, and what the
# kernel or qemu-user refuses (clone(CLONE_PIDFD), PR_SET_CHILD_SUBREAPER)
# with the fallback the job took. Then the same user installs the wheel with
# `pip install --user` into the system's python3 (PIP_BREAK_SYSTEM_PACKAGES:
# Debian 12 refuses it otherwise) and runs the same checks with
# ~/.local/bin first in PATH. Both times the `davincirun` found in PATH must
# be the compiled program, not a Python script.
#
#   bash scripts/test_install.sh [--dist DIR] [--only arm64|amd64]
#   bash scripts/test_install.sh --prepare     # only make the root file systems
#
# --dist: where the wheels are (default: dist/); each root file system takes
# the one wheel that pip finds for its Python and architecture. Needs root
# (mounts, chroot) on an x86_64 machine, mmdebstrap and qemu-user-static
# (Debian packages; the binfmt entry is mounted and enabled here when
# missing). The root file systems are made once (network: Debian
# mirrors), kept under build/rootfs/ and reused; the runs leave them as
# they were.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
user=davinci  # the non-root user, created in each root file system
uid=4242

die() {
  echo "test_install: $*" >&2
  exit 1
}

# ---- inside the mount namespace: mount, run as the user, unmount ----------
if [[ ${1:-} == --inside ]]; then
  root=$2 dist=$3 outer_namespace=$4
  [[ $(readlink /proc/self/ns/mnt) != "$outer_namespace" ]] || die "not in a mount namespace of its own"
  mounted=()
  unmount_all() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -R "${mounted[i]}" || umount -R -l "${mounted[i]}"; done
  }
  trap unmount_all EXIT
  trap 'exit 130' INT TERM HUP  # a signal ends the run through the EXIT trap
  mount -t proc proc "$root/proc"
  mounted+=("$root/proc")
  mount --rbind /dev "$root/dev"
  mounted+=("$root/dev")
  mount --make-rslave "$root/dev"
  mount -t tmpfs -o mode=1777,size=2g tmpfs "$root/tmp"
  mounted+=("$root/tmp")
  check=$root/tmp/check
  mkdir -p "$check/dist" "$check/home"
  cp "$dist"/*.whl "$check/dist/"
  cp "$repo/tests/install/install_check.py" "$check/"
  chown -R "$uid:$uid" "$check"
  # A clean environment: only what a user's login would have.
  chroot --userspec="$uid:$uid" "$root" /usr/bin/env -i HOME=/tmp/check/home USER=$user LANG=C.UTF-8 \
    PATH=/usr/local/bin:/usr/bin:/bin /bin/sh -ec '
      cd /tmp/check
      python3 -m venv venv
      venv/bin/pip install --no-index --find-links dist --disable-pip-version-check -q davincirunsdk
      venv/bin/pip list --disable-pip-version-check 2>/dev/null | grep -i davincirunsdk
      PATH=/tmp/check/venv/bin:$PATH venv/bin/python install_check.py /tmp/check/work
      PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --user --no-index --find-links dist \
        --disable-pip-version-check --no-warn-script-location -q davincirunsdk
      PATH=$HOME/.local/bin:$PATH python3 install_check.py /tmp/check/work-user --user'
  exit 0
fi

# ---- the host side ----------------------------------------------------------
dist=$repo/dist
only=
prepare=
while [[ $# -gt 0 ]]; do
  case $1 in
    --prepare) prepare=1; shift ;;
    --dist) dist=$(realpath "$2"); shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) die "unknown argument $1 (usage: bash scripts/test_install.sh [--dist DIR] [--only arm64|amd64])" ;;
  esac
done
[[ $only == "" || $only == arm64 || $only == amd64 ]] || die "--only $only: arm64 or amd64"
[[ $(uname -m) == x86_64 ]] || die "runs on an x86_64 machine (this is $(uname -m))"
[[ $(id -u) == 0 ]] || die "needs root: it mounts file systems and uses chroot"
command -v mmdebstrap >/dev/null || die "needs mmdebstrap (apt-get install mmdebstrap)"
[[ -n $prepare ]] || compgen -G "$dist/*.whl" >/dev/null ||
  die "no wheel in $dist (bash scripts/build_wheels.sh, or --dist DIR)"

# Makes qemu-user run arm64 programs through binfmt_misc, also inside a
# chroot (the F flag: the interpreter is opened when registered).
enable_qemu() {
  [[ -x /usr/libexec/qemu-binfmt/aarch64-binfmt-P || -x /usr/bin/qemu-aarch64-static ]] ||
    die "needs qemu-user-static (apt-get install qemu-user-static) to run arm64 programs"
  [[ -f /proc/sys/fs/binfmt_misc/status ]] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  if ! grep -qx enabled /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null; then
    update-binfmts --enable qemu-aarch64
  fi
  grep -q '^flags: .*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 ||
    die "the binfmt entry qemu-aarch64 lacks the F flag: arm64 programs would not start in a chroot"
}

# build/rootfs/<suite>-<arch>: made once by mmdebstrap, with python3 and the
# non-root user; a half-made one (interrupted) is never used.
make_rootfs() {
  local suite=$1 arch=$2
  local dir=$repo/build/rootfs/$suite-$arch
  if [[ ! -f $dir.done ]]; then
    echo "== making the $suite $arch root file system in $dir (once)" >&2
    rm -rf "$dir" "$dir.tmp"
    mkdir -p "$(dirname "$dir")"
    mmdebstrap --quiet --variant=minbase --architectures="$arch" --include=python3,python3-venv,python3-pip \
      --customize-hook="chroot \"\$1\" useradd --uid $uid --user-group --create-home $user" \
      "$suite" "$dir.tmp" >&2
    mv "$dir.tmp" "$dir"
    touch "$dir.done"
  fi
  echo "$dir"
}

run_in() {
  local suite=$1 arch=$2 root
  root=$(make_rootfs "$suite" "$arch")
  echo "== $suite $arch ($(uname -m) host$([[ $arch == arm64 ]] && echo ', through qemu-user'))"
  unshare --mount --propagation private -- \
    bash "$repo/scripts/test_install.sh" --inside "$root" "$dist" "$(readlink /proc/self/ns/mnt)"
  # The mounts lived in that namespace only; none may show here.
  if grep -q " $root/" /proc/self/mounts; then die "a mount under $root is left"; fi
  echo "== $suite $arch: passed"
}

if [[ -n $prepare ]]; then
  enable_qemu
  make_rootfs bookworm arm64
  make_rootfs bullseye amd64
  exit 0
fi
if [[ $only != amd64 ]]; then
  enable_qemu
  run_in bookworm arm64
fi
if [[ $only != arm64 ]]; then
  run_in bullseye amd64
fi
