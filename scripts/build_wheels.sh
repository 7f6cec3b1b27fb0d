#!/usr/bin/env bash
# Builds the binary wheels: manylinux2014 (manylinux_2_17, glibc >= 2.17)
# for x86_64 and aarch64, one per CPython 3.7-3.13, into dist/, on this
# x86_64 machine with only PyPI and Debian packages, and checks each.
#
#   bash scripts/build_wheels.sh                              all 14 wheels
#   bash scripts/build_wheels.sh --arch x86_64 --python 3.11  a subset (each option repeatable)
#   options: --out DIR (dist), --work DIR (build/wheels), --no-debian-check
#
# How:
# - The sdist first (scripts/build_sdist.sh, which bundles fmt and
#   nlohmann/json); every wheel is built from it, unpacked in <work>/src.
# - The compiler is zig (PyPI ziglang, in the venv of
#   scripts/requirements-wheels.txt) targeting glibc 2.17, with libc++
#   linked statically (cmake/toolchains/zig-<arch>-linux-gnu.2.17.cmake):
#   nothing needs libstdc++, libgcc_s or a glibc newer than 2.17.
# - The core library and the two programs are built once per architecture
#   (<work>/<arch>/core); each CPython version then builds only its module,
#   with `pip wheel` of the unpacked sdist (scikit-build-core, build
#   isolation: the build requirements pip picks for that version) and
#   DAVINCIRUN_PREBUILT_CORE (<work>/<arch>/cp3X/build, incremental).
# - Python headers: x86_64, the interpreter's own (pyenv: PYENV_ROOT, default
#   ~/.pyenv, newest 3.X.Y of each 3.X); aarch64, the same headers with the
#   pyconfig.h lines that differ on aarch64 set (scripts/wheel_support.py),
#   checked against Debian's arm64 libpython3.X-dev for the versions Debian
#   has (bullseye 3.9, bookworm 3.11, trixie 3.13; unpacked with mmdebstrap
#   into <work>/debian, once) unless --no-debian-check.
# - The platform tag is set with `wheel tags` (auditwheel cannot repair a
#   foreign-architecture wheel; nothing needs repairing: no external library).
# - Checks, each failing the run: `auditwheel show` must say manylinux_2_17;
#   every ELF file (the module and the programs: `davincirun` and its
#   supervisor in the wheel's scripts directory, the package's supervisor)
#   must be of the right architecture and need only glibc's libraries at
#   GLIBC <= 2.17 (readelf); the programs are executable and in RECORD, and
#   no console script claims `davincirun` (scripts/wheel_support.py);
#   `twine check --strict`; the programs print the version (aarch64 through
#   qemu-user with Debian's arm64 glibc, when there); an x86_64 wheel is
#   installed into a new venv of its interpreter: <venv>/bin/davincirun must
#   be an ELF program, give the package's version (as must
#   `davincirunsdk.__version__`) and run a 2-rank job, and `pip uninstall`
#   must remove both programs and the package.
#   A build must not write into the (unpacked sdist's) source tree.
# Every prerequisite is checked first (scripts/build_wheels_prerequisites.sh):
# a missing one stops the run at once, naming its Debian or pyenv package.
# Prints a table at the end: wheel, size, policy, newest GLIBC symbol and
# the module's build time (wall / CPU), where each version's headers came
# from, the core builds' times and the total.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
archs=() pythons=() out=dist work=build/wheels debian_check=1
while (($#)); do
  case $1 in
    --arch) archs+=("$2"); shift 2 ;;
    --python) pythons+=("$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --no-debian-check) debian_check=0; shift ;;
    *) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
((${#archs[@]})) || archs=(x86_64 aarch64)
((${#pythons[@]})) || pythons=(3.7 3.8 3.9 3.10 3.11 3.12 3.13)
for a in "${archs[@]}"; do [[ $a == x86_64 || $a == aarch64 ]] || { echo "build_wheels: --arch $a: x86_64 or aarch64" >&2; exit 2; }; done
for v in "${pythons[@]}"; do [[ $v =~ ^3\.(7|8|9|1[0-3])$ ]] || { echo "build_wheels: --python $v: 3.7 to 3.13" >&2; exit 2; }; done
[[ $(uname -m) == x86_64 ]] || { echo "build_wheels: runs on x86_64 (this is $(uname -m))" >&2; exit 1; }
mkdir -p "$out" "$work"
out=$(cd "$out" && pwd) work=$(cd "$work" && pwd)
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
started=$SECONDS
say() { echo "build_wheels: $*"; }
# cpu_mark VAR: sets VAR to the seconds of CPU (user + system) this shell's
# finished children have used. Called directly, never in $(...), whose
# subshell would have no children.
cpu_mark() {
  times >"$work/.times"
  printf -v "$1" '%s' "$(tail -1 "$work/.times" | awk '{gsub(/s/, ""); split($1, u, "m"); split($2, s, "m"); print u[1]*60 + u[2] + s[1]*60 + s[2]}')"
}
since() { awk "BEGIN {printf \"%.0f\", $2 - $1}"; }  # since START NOW: rounded seconds

pyenv_python() {  # 3.X -> the newest pyenv 3.X.Y interpreter
  local v
  v=$(ls -d "$PYENV_ROOT"/versions/"$1".* 2>/dev/null | grep -E "/$1\.[0-9]+$" | sort -V | tail -1 || true)
  [[ -n $v && -x $v/bin/python3 ]] || return 1
  echo "$v/bin/python3"
}

debian_mirror() {
  local m=${DEBIAN_MIRROR:-}
  [[ -n $m ]] || m=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -m1 '/debian$' || true)
  [[ -n $m ]] || m=$(awk '$1 == "deb" && $2 ~ /\/debian$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  echo "$m"
}
declare -A DEBIAN_SUITE=([3.9]=bullseye [3.11]=bookworm [3.13]=trixie)
source scripts/build_wheels_prerequisites.sh
check_prerequisites

source scripts/wheel_tools.sh
wheel_tools_setup
DAVINCIRUN_ZIG=$(python -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
export DAVINCIRUN_ZIG
launcher=()
if command -v ccache >/dev/null; then
  # The zig wrappers differ per build directory only in their path.
  export CCACHE_COMPILERCHECK=content
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
say "zig $("$DAVINCIRUN_ZIG" version), $(cmake --version | head -1), out $out, work $work"

# 1. The sdist, and its tree in <work>/src: only files whose content
# changed are rewritten (with the time of now), so that the builds below
# stay incremental (the sdist's own file times are fixed, for reproducibility).
sdist=$(bash scripts/build_sdist.sh --out "$out")
rm -rf "$work/src.new" && mkdir -p "$work/src.new" "$work/src"
tar -xzmf "$sdist" -C "$work/src.new" --strip-components=1
(cd "$work/src.new" && find . -type f) | while read -r f; do
  if ! cmp -s "$work/src.new/$f" "$work/src/$f"; then
    mkdir -p "$(dirname "$work/src/$f")" && cp "$work/src.new/$f" "$work/src/$f"
  fi
done
(cd "$work/src" && find . -type f) | while read -r f; do [[ -e $work/src.new/$f ]] || rm -f "$work/src/$f"; done
rm -rf "$work/src.new"
src=$work/src
# Anything newer than this in the tree was written by a build: none may be.
touch "$work/src.synced"
version=$(sed -n 's/^version = "\([^"]*\)".*/\1/p' "$src/pyproject.toml" | head -1)

# Debian's root file systems (variant extract: the named packages and their
# dependencies, unpacked), from this machine's Debian mirror (DEBIAN_SUITE:
# the suites, above).
debian_root() {  # SUITE ARCH PYVERSION -> prints the root directory
  local dir=$work/debian/$1-$2
  if [[ ! -f $dir/.done ]]; then
    local mirror
    mirror=$(debian_mirror)
    [[ -n $mirror ]] || { echo "build_wheels: no Debian mirror (set DEBIAN_MIRROR)" >&2; return 1; }
    rm -rf "$dir" && mkdir -p "$work/debian"
    say "Debian $1 $2: unpacking libpython$3-dev (mmdebstrap, $mirror)" >&2
    # No errexit inside $(...): a failure must return, not mark the root done.
    mmdebstrap --quiet --variant=extract --architectures="$2" --include="libpython$3-dev" "$1" "$dir" \
      "deb $mirror $1 main" >&2 || { echo "build_wheels: mmdebstrap failed for Debian $1 $2" >&2; return 1; }
    touch "$dir/.done"
  fi
  echo "$dir"
}

rows=() failed=() core_times=() header_notes=()
for arch in "${archs[@]}"; do
  triplet=$arch-linux-gnu
  toolchain=$src/cmake/toolchains/zig-$arch-linux-gnu.2.17.cmake
  plat=manylinux_2_17_$arch.manylinux2014_$arch
  # What runs the aarch64 programs here: qemu-user with Debian's arm64 glibc.
  run=()
  if [[ $arch == aarch64 ]]; then
    qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64)
    arm_root=$(debian_root bookworm arm64 3.11) || exit 1
    run=("$qemu" -L "$arm_root")
  fi

  # 2. The core library and the programs, once per architecture.
  core=$work/$arch/core
  t0=$SECONDS
  cpu_mark c0
  if [[ ! -f $core/CMakeCache.txt ]]; then
    say "$arch: configuring the core ($core; zig builds its libc++ once: minutes)"
    cmake -S "$src" -B "$core" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCMAKE_BUILD_TYPE=Release \
      -DDAVINCIRUN_BUILD_PYTHON=OFF "${launcher[@]}" >"$work/$arch-core.log" 2>&1 ||
      { tail -30 "$work/$arch-core.log" >&2; exit 1; }
  fi
  cmake --build "$core" -j2 --target davincirun_core davincirun davincirun-supervisor >>"$work/$arch-core.log" 2>&1 ||
    { tail -30 "$work/$arch-core.log" >&2; exit 1; }
  cpu_mark c1
  core_times+=("$arch core and programs: $((SECONDS - t0)) s wall, $(since "$c0" "$c1") s CPU")
  say "${core_times[-1]}"
  if ((${#run[@]})) || [[ $arch == x86_64 ]]; then
    got=$("${run[@]}" "$core/cpp/davincirun" --version)
    [[ $got == "davincirun $version" ]] || { echo "build_wheels: $arch davincirun --version: '$got'" >&2; exit 1; }
  fi

  # 3. One module and wheel per CPython version.
  for pyver in "${pythons[@]}"; do
    tag=cp${pyver/./}
    name="$arch $tag"
    if ! pyexe=$(pyenv_python "$pyver"); then
      say "$name: no CPython $pyver under $PYENV_ROOT/versions: not built"
      failed+=("$name (no CPython $pyver)")
      continue
    fi
    dir=$work/$arch/$tag
    mkdir -p "$dir"
    log=$dir/build.log
    : >"$log"
    include=$("$pyexe" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    ext_suffix=$("$pyexe" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    # scikit-build-core's settings as environment variables: pip 22.0 (the
    # one of CPython 3.7) has no --config-settings.
    defines="CMAKE_TOOLCHAIN_FILE=$toolchain;DAVINCIRUN_PREBUILT_CORE=$core"
    ((${#launcher[@]})) && defines+=";CMAKE_CXX_COMPILER_LAUNCHER=ccache"
    env=(SKBUILD_BUILD_DIR="$dir/build" SKBUILD_CMAKE_BUILD_TYPE=Release)
    headers="pyenv $("$pyexe" -c 'import platform; print(platform.python_version())')"
    if [[ $arch == aarch64 ]]; then
      target_include=$work/headers/aarch64/$(basename "$include")
      check=()
      suite=${DEBIAN_SUITE[$pyver]:-}
      if ((debian_check)) && [[ -n $suite ]]; then
        deb_x86=$(debian_root "$suite" amd64 "$pyver") || exit 1
        deb_arm=$(debian_root "$suite" arm64 "$pyver") || exit 1
        check=(--debian-amd64 "$deb_x86/usr/include/x86_64-linux-gnu/python$pyver/pyconfig.h"
          --debian-arm64 "$deb_arm/usr/include/aarch64-linux-gnu/python$pyver/pyconfig.h")
      fi
      note=$(python scripts/wheel_support.py headers "$include" "$target_include" "${check[@]}")
      headers+=", $note"
      defines+=";Python_INCLUDE_DIR=$target_include"
      ext_suffix=${ext_suffix/x86_64-linux-gnu/aarch64-linux-gnu}
      # scikit-build-core names the module from it (SKBUILD_SOABI).
      env+=(SETUPTOOLS_EXT_SUFFIX="$ext_suffix")
    fi
    header_notes+=("$name: $headers")
    say "$name: building the module ($ext_suffix; headers: $headers)"
    t0=$SECONDS
    cpu_mark c0
    rm -rf "$dir/wheel"
    if ! env "${env[@]}" SKBUILD_CMAKE_DEFINE="$defines" "$pyexe" -m pip wheel -v --no-deps -w "$dir/wheel" "$src" \
      >>"$log" 2>&1; then
      tail -30 "$log" >&2
      failed+=("$name (build failed: $log)")
      continue
    fi
    cpu_mark c1
    build_time="$((SECONDS - t0)) s / $(since "$c0" "$c1") s"
    written=$(find "$src" -newer "$work/src.synced" | head -5)
    built=$(ls "$dir"/wheel/davincirunsdk-*.whl)
    retagged=$dir/wheel/$(python -m wheel tags --remove --platform-tag "$plat" "$built")
    # `wheel tags` sorts the platform tags; the file is named in the usual
    # order (auditwheel's, PyPI's), which means the same to pip.
    wheel=$out/$(basename "$built" | sed -E "s/-linux_x86_64\.whl$/-$plat.whl/")
    rm -f "$wheel"
    mv "$retagged" "$wheel"
    # What pip's isolated build installed for this version.
    tools=$(grep -m1 -o -E 'Successfully installed .*' "$log" | tr ' ' '\n' |
      grep -E '^(pybind11|scikit[-_]build[-_]core)-' | paste -sd' ' - || true)

    # 4. The checks.
    errors=()
    [[ -z $written ]] || errors+=("the build wrote into the source tree: $(echo $written)")
    result=$(python scripts/wheel_support.py check "$wheel" "$arch") || true
    # Lines: policy, newest GLIBC, then one per error.
    readarray -t parsed < <(python -c '
import json, sys
try:
    r = json.loads(sys.argv[1])
except ValueError:
    r = {"policy": "?", "max_glibc": "?", "errors": ["wheel_support.py check failed"]}
print(r["policy"]); print(r["max_glibc"]); [print(e) for e in r["errors"]]' "$result")
    policy=${parsed[0]} glibc=${parsed[1]}
    errors+=("${parsed[@]:2}")
    twine check --strict "$wheel" >>"$log" 2>&1 || errors+=("twine check failed ($log)")
    [[ $(basename "$wheel") == davincirunsdk-$version-$tag-$tag*-$plat.whl ]] || errors+=("unexpected file name")
    if [[ $arch == x86_64 ]]; then
      rm -rf "$dir/venv"
      "$pyexe" -m venv "$dir/venv"
      "$dir/venv/bin/python" -m pip install -q --no-deps --no-index "$wheel" >>"$log" 2>&1 || errors+=("pip install failed")
      # The command pip put in the venv's bin is the program itself, and
      # runs a job with the supervisor beside it.
      installed=$dir/venv/bin/davincirun
      cmp -s -n 4 <(printf '\177ELF') "$installed" || errors+=("installed $installed is not an ELF program")
      got=$("$installed" --version 2>&1 || true)
      [[ $got == "davincirun $version" ]] || errors+=("installed davincirun --version: '$got'")
      mkdir -p "$dir/job/locks"
      (cd "$dir" && DAVINCIRUN_LOCK_DIR=$dir/job/locks "$installed" -q --nproc 2 -l "$dir/job/log" true) >>"$log" 2>&1 ||
        errors+=("installed davincirun: a 2-rank job of true failed ($log)")
      rm -rf "$dir/job"
      got=$(cd / && "$dir/venv/bin/python" -c 'import davincirunsdk; print(davincirunsdk.__version__)' 2>&1 || true)
      [[ $got == "$version" ]] || errors+=("installed davincirunsdk.__version__: '$got'")
      "$dir/venv/bin/python" -m pip uninstall -q -y davincirunsdk >>"$log" 2>&1 || errors+=("pip uninstall failed")
      left=$(cd "$dir/venv" && ls bin/davincirun* lib/python*/site-packages/davincirunsdk 2>/dev/null || true)
      [[ -z $left ]] || errors+=("pip uninstall left $(echo $left)")
      rm -rf "$dir/venv"
    elif ((${#run[@]})); then
      tmp=$(mktemp -d)
      unzip -q "$wheel" "davincirunsdk-$version.data/scripts/*" -d "$tmp"
      got=$("${run[@]}" "$tmp/davincirunsdk-$version.data/scripts/davincirun" --version 2>&1 || true)
      rm -rf "$tmp"
      [[ $got == "davincirun $version" ]] || errors+=("davincirun --version under qemu: '$got'")
    fi
    size=$(du -k "$wheel" | cut -f1)
    status=ok
    if ((${#errors[@]})); then
      status=FAILED
      failed+=("$name: ${errors[*]}")
      printf 'build_wheels: %s: %s\n' "$name" "${errors[@]}" >&2
    fi
    rows+=("$(basename "$wheel")|$size KiB|$policy|GLIBC_$glibc|$build_time|$status")
    say "$name: $status $(basename "$wheel") ($size KiB, $policy, GLIBC_$glibc, $build_time; $tools)"
  done
done

echo
{
  echo "wheel|size|policy|newest GLIBC|module build (wall / CPU)|checks"
  printf '%s\n' "${rows[@]}"
} | column -t -s '|'
echo "Python headers:"
printf '  %s\n' "${header_notes[@]}"
printf '%s\n' "${core_times[@]}"
cpu_mark c1
echo "total: $((SECONDS - started)) s wall, $(since 0 "$c1") s CPU (user + system of everything this run started)"
for f in "${failed[@]}"; do echo "build_wheels: FAILED: $f" >&2; done
((${#failed[@]} == 0))
