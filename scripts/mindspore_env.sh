#!/usr/bin/env bash
# A virtual environment with MindSpore's CPU wheel, for the tests that train
# with MindSpore for real (pytest -m mindspore; tests/python/frameworks/test_mindspore.py):
#
#   build/mindspore-env/   venv: mindspore==2.10.0, numpy<2, scikit-learn
#
# Its own venv, pinned to numpy 1.x: one early run with numpy 2 saw the
# workers fail to unregister at exit and the scheduler exit 1 after 30 s;
# later runs on numpy 2.2-2.4 did not repeat it (docs/mindspore.md), so the
# pin stays as the pair these tests run with. The project venv, build/venv,
# carries torch with numpy 2. The package under test is not installed here:
# the tests start ranks with this venv's python from a davincirun of
# build/venv, as a user's image starts its framework's python.
# The wheel (~800 MB, x86_64 CPython 3.11 only) comes from PyPI through
# pip's cache, so a second setup downloads nothing. Safe to run again: a
# stamp holding the requirements and the interpreter skips a finished setup.
#
#   bash scripts/mindspore_env.sh          set up (prints the venv's python)
#   bash scripts/mindspore_env.sh --clean  remove build/mindspore-env
set -euo pipefail
cd "$(dirname "$0")/.."
ENV_DIR=$PWD/build/mindspore-env
BASE_PYTHON=${MINDSPORE_BASE_PYTHON:-python3.11}
REQUIREMENTS=(mindspore==2.10.0 "numpy<2" scikit-learn)
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

if [[ ${1:-} == --clean ]]; then
  rm -rf "$ENV_DIR"
  exit 0
fi
if ! command -v "$BASE_PYTHON" >/dev/null; then
  echo "mindspore_env: $BASE_PYTHON not found: MindSpore 2.10.0's CPU wheel is for CPython 3.11 (set MINDSPORE_BASE_PYTHON)" >&2
  exit 1
fi
wanted="${REQUIREMENTS[*]} $("$BASE_PYTHON" -c 'import sys; print(sys.version)')"
if [[ -f $ENV_DIR/.stamp && $(<"$ENV_DIR/.stamp") == "$wanted" ]] &&
  "$ENV_DIR/bin/python" -c "import mindspore" 2>/dev/null; then
  echo "$ENV_DIR/bin/python"
  exit 0
fi
rm -rf "$ENV_DIR"
"$BASE_PYTHON" -m venv "$ENV_DIR"
echo "mindspore_env: installing ${REQUIREMENTS[*]} into $ENV_DIR (pip)" >&2
"$ENV_DIR/bin/python" -m pip install -q "${REQUIREMENTS[@]}" 2> >(grep -v "is ignored: it is neither" >&2)
echo "$wanted" >"$ENV_DIR/.stamp"
echo "$ENV_DIR/bin/python"
