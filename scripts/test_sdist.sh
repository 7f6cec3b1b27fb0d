#!/usr/bin/env bash
# The sdist builds offline with only a C++ compiler: builds the sdist
# (scripts/build_sdist.sh), then `pip install`s it into a new, clean venv
# with --no-index, its build requirements (scikit-build-core, pybind11,
# cmake, ninja and theirs) taken from a local wheelhouse prepared first, with
# no CMake or ninja on PATH (so they must come from that wheelhouse, as from
# PyPI on a user's machine) and the system's fmt and nlohmann/json hidden
# (CMAKE_DISABLE_FIND_PACKAGE_*: the sdist's bundled copies must be used).
# Then, from that venv: <venv>/bin/davincirun must be the compiled program
# (an ELF file, its supervisor beside it), print the version and run a
# script without execute permission with <venv>/bin/pythonX.Y; and a real
# 2-rank job through the CLI and through the Python API, one of them with a
# rank failing. Takes a few minutes (the C++ build, 2 cores); CMAKE_CXX_COMPILER_LAUNCHER
# from the environment (e.g. ccache) is passed on.
#
#   bash scripts/test_sdist.sh [--python PYTHON] [--sdist FILE] [--keep]
#   (default: python3; a new sdist; the work directory build/sdist-test is
#   removed on success unless --keep, the wheelhouse kept for the next run)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
python=python3 sdist="" keep=0
while (($#)); do
  case $1 in
    --python) python=$2; shift 2 ;;
    --sdist) sdist=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) sed -n '16,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
say() { echo "test_sdist: $*"; }
fail() { echo "test_sdist: FAILED: $*" >&2; exit 1; }
started=$SECONDS
python=$(command -v "$python")
pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
work=$REPO/build/sdist-test
wheelhouse=$REPO/build/sdist-test-wheelhouse/$pyver
rm -rf "$work"
mkdir -p "$work" "$wheelhouse"

[[ -n $sdist ]] || sdist=$(bash scripts/build_sdist.sh)
sdist=$(cd "$(dirname "$sdist")" && pwd)/$(basename "$sdist")
version=$(tar -xzOf "$sdist" --wildcards '*/PKG-INFO' | sed -n 's/^Version: //p')
say "$sdist (version $version), CPython $pyver ($python)"

# 1. The wheelhouse: what pip's isolated build needs, for this interpreter
# (the only step that uses the network).
say "wheelhouse ${wheelhouse#"$REPO"/}: scikit-build-core pybind11 cmake ninja"
"$python" -m pip download -q -d "$wheelhouse" scikit-build-core pybind11 cmake ninja \
  2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)

# 2. A PATH with everything of /usr/bin but CMake and ninja.
mkdir -p "$work/bin"
for f in /usr/bin/*; do
  case ${f##*/} in cmake | ccmake | cpack | ctest | ninja) continue ;; esac
  ln -s "$f" "$work/bin/${f##*/}"
done
"$python" -m venv "$work/venv"
clean_path=$work/venv/bin:$work/bin
if PATH=$clean_path command -v cmake >/dev/null || PATH=$clean_path command -v ninja >/dev/null; then
  fail "cmake or ninja is still on the clean PATH"
fi

# 3. The offline install, from the tarball as a user would (--no-cache-dir:
# never a wheel pip kept from an earlier run).
say "pip install --no-index (log: ${work#"$REPO"/}/install.log)"
t0=$SECONDS
if ! env -i HOME="$HOME" PATH="$clean_path" LANG=C.UTF-8 TMPDIR="${TMPDIR:-/tmp}" \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+CMAKE_CXX_COMPILER_LAUNCHER="$CMAKE_CXX_COMPILER_LAUNCHER"} \
  ${CCACHE_DIR:+CCACHE_DIR="$CCACHE_DIR"} ${CCACHE_BASEDIR:+CCACHE_BASEDIR="$CCACHE_BASEDIR"} \
  PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 PIP_FIND_LINKS="$wheelhouse" \
  SKBUILD_CMAKE_DEFINE="CMAKE_DISABLE_FIND_PACKAGE_fmt=ON;CMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON" \
  "$work/venv/bin/python" -m pip install -v --no-cache-dir "$sdist" >"$work/install.log" 2>&1; then
  tail -40 "$work/install.log" >&2
  fail "pip install $sdist"
fi
say "installed in $((SECONDS - t0)) s"
for expected in "fmt: the bundled copy" "nlohmann_json: the bundled copy"; do
  grep -q "$expected" "$work/install.log" || fail "the build did not say '$expected'"
done
for tool in cmake ninja; do
  grep -q -E "(Processing|Using cached|Collecting|Obtaining).*$tool-[0-9]" "$work/install.log" ||
    grep -q -E "Successfully installed.* $tool-[0-9]" "$work/install.log" ||
    fail "$tool was not installed from the wheelhouse"
done

# 4. It runs: the program itself, the version, then real jobs.
cmp -s -n 4 <(printf '\177ELF') "$work/venv/bin/davincirun" || fail "$work/venv/bin/davincirun is not an ELF program"
[[ -x $work/venv/bin/davincirun-supervisor ]] || fail "no $work/venv/bin/davincirun-supervisor"
got=$("$work/venv/bin/davincirun" --version)
[[ $got == "davincirun $version" ]] || fail "davincirun --version: '$got'"
job=$work/job
mkdir -p "$job"
cat >"$job/rank_table.json" <<'EOF'
{"version": "1.0", "server_count": "1", "status": "completed",
 "server_list": [{"server_id": "127.0.0.1",
                  "device": [{"device_id": "0", "rank_id": "0"}, {"device_id": "1", "rank_id": "1"}]}]}
EOF
cat >"$job/rank.py" <<'EOF'
import os
import sys
print("rank %s of %s on device %s" % (os.environ["RANK_ID"], os.environ["RANK_SIZE"], os.environ["DEVICE_ID"]))
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 and os.environ["RANK_ID"] == "1" else 0)
EOF
export DAVINCIRUN_LOCK_DIR=$job/locks
cd "$job"
"$work/venv/bin/davincirun" -r rank_table.json -l cli-log -- "$work/venv/bin/python" rank.py >cli.out 2>&1 ||
  { cat cli.out >&2; fail "the CLI job failed"; }
for r in 0 1; do
  grep -q "rank $r of 2 on device $r" cli-log/latest/rank_$r.device_$r.log || fail "CLI job: rank $r's log"
done
# rank.py has no execute permission: the venv's own pythonX.Y runs it,
# with no PATH to find one in.
chmod 644 rank.py
env PATH=/nonexistent "$work/venv/bin/davincirun" -r rank_table.json -l cli-log rank.py >py.out 2>&1 ||
  { cat py.out >&2; fail "davincirun rank.py failed"; }
grep -q "running it with $work/venv/bin/python$pyver\$" py.out ||
  { cat py.out >&2; fail "rank.py did not run with the venv's python$pyver"; }
status=0
"$work/venv/bin/davincirun" -r rank_table.json -l cli-log -- "$work/venv/bin/python" rank.py 3 >fail.out 2>&1 || status=$?
[[ $status == 3 ]] || { cat fail.out >&2; fail "a rank exiting 3: davincirun exited $status"; }
"$work/venv/bin/python" - <<'EOF' || fail "the Python API job"
import sys
import davincirunsdk as d
assert d.start_and_wait_distributed_train([sys.executable, "rank.py"], log_dir="api-log", rank_table="rank_table.json",
                                          output_notebook=False) == 0
try:
    d.start_and_wait_distributed_train([sys.executable, "rank.py", "5"], log_dir="api-log",
                                       rank_table="rank_table.json", output_notebook=False)
    raise SystemExit("no DistributedRuntimeError")
except d.DistributedRuntimeError as e:
    assert "rank 1" in str(e) and "exit code 5" in str(e), e
EOF
cd "$REPO"
say "passed in $((SECONDS - started)) s: offline install (bundled fmt and nlohmann/json; cmake and ninja from the wheelhouse), <venv>/bin/davincirun the program ($version), CLI and Python API jobs"
((keep)) || rm -rf "$work"
