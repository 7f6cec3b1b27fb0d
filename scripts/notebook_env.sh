#!/usr/bin/env bash
# Sets up what tests/python/job/test_notebook.py and frameworks/test_example_notebook.py need
# to run real notebooks in real Jupyter kernels, against ipykernel 6 and
# ipykernel 7 (their rules for output printed from background threads differ):
#
#   build/notebook-env/wheel/          one davincirunsdk wheel, built from this tree
#   build/notebook-env/cmake-build/    its own incremental CMake build directory
#   build/notebook-env/ipykernel6/     a venv: ipykernel>=6.29,<7 + that wheel
#   build/notebook-env/ipykernel7/     a venv: ipykernel>=7,<8   + that wheel
#                                      (both also see build/venv's site-packages,
#                                      for torch and scikit-learn: see PROJECT_PTH)
#   build/notebook-env/kernels/share/jupyter/kernels/davincirun-ipykernel{6,7}/
#                                      one kernelspec per venv (JUPYTER_PATH=
#                                      build/notebook-env/kernels/share/jupyter)
#
# and nbclient + nbformat in the project venv, build/venv (scripts/setup.sh
# makes it first), which runs the notebooks.
#
# Safe to run again: each step checks what is there (a digest of the sources
# the wheel was built from; the wheel's sha256, the ipykernel requirement and
# how the venv was made, recorded in each venv; the kernelspec's interpreter)
# and skips what is done, so a second run takes a few seconds. After editing
# the package (C++ or Python), run it again: the wheel is rebuilt
# incrementally and reinstalled.
#
#   bash scripts/notebook_env.sh            set up / bring up to date
#   bash scripts/notebook_env.sh --digest   print the digest of the wheel's sources
#   bash scripts/notebook_env.sh --clean    remove build/notebook-env
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
source scripts/venv.sh
ENV_DIR=$REPO/build/notebook-env

# ipykernel major version -> requirement installed in its venv.
declare -A IPYKERNEL_REQUIREMENT=(
  [6]="ipykernel>=6.29,<7"
  [7]="ipykernel>=7,<8"
)
KERNEL_PREFIX=davincirun-ipykernel

# How the venvs are made: from the project venv's interpreter, and with a
# .pth file (PROJECT_PTH) that adds build/venv's site-packages after the
# venv's own, so that a kernel also imports what the project venv has, such
# as torch and scikit-learn, which examples/notebook.ipynb trains with (far
# too big to install twice), just as a platform's notebook kernel comes with
# its frameworks; the system's site-packages stay out. What a venv installs
# itself comes first on its sys.path: ipykernel and all its dependencies are
# installed into it even when build/venv has them (--ignore-installed), and
# its davincirunsdk must be its own (checked below), never build/venv's.
# --without-pip: build/venv's pip (seen through the .pth file) installs into
# the venv, which so holds no bundled pip and setuptools older than
# build/venv's to hide them (torch requires a newer setuptools than venv
# bundles).
VENV_OPTIONS=(--without-pip)

# The wheel gets its own, kept build directory, for incremental rebuilds
# (pyproject.toml sets none: `pip install .` builds in a temporary one).
# DAVINCIRUN_CORE_PRESET=<a preset of CMakePresets.json> (scripts/test.sh
# sets "tests"): the wheel takes the core, the CLI library and the supervisor
# of that preset's build, brought up to date first, and compiles only the
# module and the command (cmake/prebuilt_core.cmake): one compile of the core
# then serves the C++ tests, this wheel and the other CPython versions' modules.
CORE_PRESET=${DAVINCIRUN_CORE_PRESET:-}
WHEEL_SETTINGS=(-C "build-dir=$ENV_DIR/cmake-build${CORE_PRESET:+-$CORE_PRESET}")
[[ -z $CORE_PRESET ]] || WHEEL_SETTINGS+=(-C "cmake.define.DAVINCIRUN_PREBUILT_CORE=$REPO/build/$CORE_PRESET")

# What the wheel is built from (pyproject.toml's wheel.packages, the CMake
# project, the metadata files). Not which build compiled its core
# (DAVINCIRUN_CORE_PRESET): either way it is the package of these sources, and
# the tests, which check the digest without that variable, take it as such.
source_digest() {
  {
    find CMakeLists.txt cmake cpp python pyproject.toml README.md LICENSE -type f \
      ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-64
}

case "${1:-}" in
  --digest) source_digest; exit 0 ;;
  --clean) rm -rf "$ENV_DIR"; echo "notebook-env: removed $ENV_DIR"; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--digest|--clean]" >&2; exit 2 ;;
esac

mkdir -p "$ENV_DIR"
exec 9>"$ENV_DIR/.lock"
flock 9  # two runs at once wait for each other
started=$SECONDS
say() { echo "notebook-env: $*"; }
# Runs a command, hiding two harmless warnings: pip's about a configured
# find-links/index location missing on this machine, and ipykernel's about
# installing a kernelspec outside the default search path (on purpose).
quiet() {
  "$@" 2> >(grep -v -e 'is ignored: it is neither a file nor a directory' \
    -e 'The kernelspec may not be found' >&2)
}
use_venv
PYTHON_EXE=$VENV_PYTHON
PROJECT_SITE=$("$VENV_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# An "import" line of a .pth file runs: site.addsitedir also reads the .pth
# files of build/venv's site-packages, as its own interpreter does.
PROJECT_PTH="import site; site.addsitedir('$PROJECT_SITE')"

# 1. The runner side: nbclient and nbformat in build/venv.
runner_versions() {
  "$PYTHON_EXE" -c '
import importlib.metadata as m, importlib.util as u
print(" ".join(m.version(n) if u.find_spec(n) else "-" for n in ("nbclient", "nbformat", "jupyter_client")))'
}
read -r nbclient_v nbformat_v jupyter_client_v < <(runner_versions)
if [[ $nbclient_v == - || $nbformat_v == - ]]; then
  say "runner $PYTHON_EXE: installing nbclient nbformat"
  quiet "$PYTHON_EXE" -m pip install -q nbclient nbformat
  read -r nbclient_v nbformat_v jupyter_client_v < <(runner_versions)
  state=installed
else
  state="already installed"
fi
say "runner $PYTHON_EXE: nbclient $nbclient_v, nbformat $nbformat_v, jupyter_client $jupyter_client_v ($state)"

# 2. One davincirunsdk wheel, rebuilt only when its sources changed.
digest=$(source_digest)
wheel_dir=$ENV_DIR/wheel
shopt -s nullglob
wheels=("$wheel_dir"/davincirunsdk-*.whl)
if ((${#wheels[@]} == 1)) && [[ -f $wheel_dir/SOURCE_DIGEST && $(<"$wheel_dir/SOURCE_DIGEST") == "$digest" ]]; then
  say "wheel: ${wheels[0]#"$REPO"/} is up to date with the sources"
else
  say "wheel: building from $REPO (compiles the C++ core: minutes the first time, incremental later)"
  rm -rf "$wheel_dir.new"
  t0=$SECONDS
  if [[ -n $CORE_PRESET ]]; then
    say "wheel: the core and programs of build/$CORE_PRESET (cmake --preset $CORE_PRESET)"
    cmake --preset "$CORE_PRESET" >/dev/null
    cmake --build --preset "$CORE_PRESET" --target davincirun_core davincirun_job_host davincirun_cli davincirun davincirun-supervisor
  fi
  quiet "$PYTHON_EXE" -m pip wheel -q --no-build-isolation --no-deps "${WHEEL_SETTINGS[@]}" -w "$wheel_dir.new" "$REPO"
  # The digest taken before the build: a source edited during the build
  # makes the next run build again.
  echo "$digest" >"$wheel_dir.new/SOURCE_DIGEST"
  rm -rf "$wheel_dir"
  mv "$wheel_dir.new" "$wheel_dir"
  wheels=("$wheel_dir"/davincirunsdk-*.whl)
  say "wheel: built ${wheels[0]#"$REPO"/} in $((SECONDS - t0)) s"
fi
((${#wheels[@]} == 1)) || { echo "notebook-env: expected one wheel in $wheel_dir" >&2; exit 1; }
wheel=${wheels[0]}
wheel_sha=$(sha256sum "$wheel" | cut -c1-64)

# 3. One venv and kernelspec per ipykernel major version.
# Prints: ipykernel version, davincirunsdk version ("-" when it cannot be
# imported), IPython version, jupyter_client version, torch version. The
# ipykernel and davincirunsdk versions are "-" unless the venv's own copy is
# the one imported (the venv also sees build/venv's packages).
venv_versions() {
  "$1" -c '
import importlib.metadata as m, importlib.util as u, os, sys
prefix = os.path.realpath(sys.prefix) + os.sep
def v(name):
    try:
        return m.version(name) if u.find_spec(name) else "-"
    except Exception:
        return "-"
def own(name):
    try:
        spec = u.find_spec(name)
        inside = spec is not None and os.path.realpath(spec.origin).startswith(prefix)
    except Exception:
        inside = False
    return v(name) if inside else "-"
try:
    import davincirunsdk._core
    core = own("davincirunsdk")
except Exception:
    core = "-"
print(own("ipykernel"), core, v("IPython"), v("jupyter_client"), v("torch"))' 2>/dev/null || echo "- - - - -"
}

for major in 6 7; do
  venv=$ENV_DIR/ipykernel$major
  vpy=$venv/bin/python
  requirement=${IPYKERNEL_REQUIREMENT[$major]}
  name=$KERNEL_PREFIX$major
  did=()

  # The venv is made again when it was made otherwise or from another
  # interpreter, or sees other site-packages.
  venv_made="$PYTHON_EXE ${VENV_OPTIONS[*]} $PROJECT_PTH"
  if ! [[ -x $vpy ]] || ! "$vpy" -c pass 2>/dev/null || ! [[ -f $venv/.venv-options ]] \
    || [[ $(<"$venv/.venv-options") != "$venv_made" ]]; then
    if [[ -d $venv ]]; then
      say "$name: recreating venv ${venv#"$REPO"/} ($PYTHON_EXE -m venv ${VENV_OPTIONS[*]})"
    else
      say "$name: creating venv ${venv#"$REPO"/} ($PYTHON_EXE -m venv ${VENV_OPTIONS[*]})"
    fi
    rm -rf "$venv"
    "$PYTHON_EXE" -m venv "${VENV_OPTIONS[@]}" "$venv"
    echo "$PROJECT_PTH" >"$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/davincirun-project-venv.pth"
    echo "$venv_made" >"$venv/.venv-options"
    did+=("venv created")
  fi
  read -r ipykernel_v dvr_v ipython_v jc_v torch_v < <(venv_versions "$vpy")

  if [[ $ipykernel_v == - || ${ipykernel_v%%.*} != "$major" || ! -f $venv/.ipykernel-requirement \
    || $(<"$venv/.ipykernel-requirement") != "$requirement" ]]; then
    say "$name: installing $requirement"
    # --no-warn-conflicts: pip would list build/venv's packages whose
    # requirements the venv's copies do not meet (e.g. an upper bound on
    # python-dateutil), though the venv's own set is resolved as a whole;
    # torch and scikit-learn, imported from build/venv, are exercised by
    # tests/python/frameworks/test_example_notebook.py.
    quiet "$vpy" -m pip install -q --ignore-installed --no-warn-conflicts "$requirement"
    echo "$requirement" >"$venv/.ipykernel-requirement"
    did+=("ipykernel installed")
  fi

  if [[ $dvr_v == - || ! -f $venv/.davincirunsdk-wheel || $(<"$venv/.davincirunsdk-wheel") != "$wheel_sha" ]]; then
    say "$name: installing ${wheel#"$REPO"/}"
    # Every build has the same version number: force the reinstall.
    quiet "$vpy" -m pip install -q --force-reinstall --no-deps "$wheel"
    echo "$wheel_sha" >"$venv/.davincirunsdk-wheel"
    did+=("wheel installed")
  fi

  spec=$ENV_DIR/kernels/share/jupyter/kernels/$name/kernel.json
  if ! [[ -f $spec ]] || ! grep -qF "\"$vpy\"" "$spec"; then
    say "$name: registering the kernelspec"
    quiet "$vpy" -m ipykernel install --prefix "$ENV_DIR/kernels" --name "$name" \
      --display-name "Python 3 (davincirunsdk, ipykernel $major)" >/dev/null
    did+=("kernelspec registered")
  fi

  ((${#did[@]})) && read -r ipykernel_v dvr_v ipython_v jc_v torch_v < <(venv_versions "$vpy")
  if [[ ${ipykernel_v%%.*} != "$major" || $dvr_v == - ]]; then
    echo "notebook-env: $name: the venv is not usable (ipykernel $ipykernel_v, davincirunsdk $dvr_v)" >&2
    exit 1
  fi
  summary="ipykernel $ipykernel_v, IPython $ipython_v, jupyter_client $jc_v, davincirunsdk $dvr_v, torch $torch_v"
  if ((${#did[@]})); then
    say "$name: $summary ($(IFS=,; echo "${did[*]}" | sed 's/,/, /g'))"
  else
    say "$name: $summary (up to date)"
  fi
done

say "kernelspecs: ${ENV_DIR#"$REPO"/}/kernels/share/jupyter/kernels (JUPYTER_PATH=$ENV_DIR/kernels/share/jupyter)"
say "done in $((SECONDS - started)) s"
