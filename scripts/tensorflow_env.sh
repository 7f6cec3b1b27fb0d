#!/usr/bin/env bash
# Virtual environments with TensorFlow's CPU builds, for the tests and the
# examples that train with TensorFlow for real (examples/tensorflow/):
#
#   build/tf2-env/  venv from CPython 3.11: tensorflow-cpu==2.21.0, tf-keras==2.21.0
#   build/tf1-env/  venv from pyenv's newest CPython 3.7.x: tensorflow==1.15.5
#                   (the last 1.x release, the line CANN's TF adapter builds on),
#                   with the pins its import needs (TF1_REQUIREMENTS below)
#
# TF 2: tensorflow-cpu is the CPU-only build (its package is 1.3 GB
# installed, against 1.9 GB for tensorflow's, which carries CUDA kernels;
# the venvs: tf2-env 1.6 GB, tf1-env 0.6 GB). tf-keras is Keras 2 for
# TF 2.16+: the Keras 3 that TF 2.21 depends on fails in model.fit under
# MultiWorkerMirroredStrategy (keras-team/keras#20585), and TF's own
# multi-worker Keras tutorial trains with tf_keras. tf-keras requires the
# distribution named tensorflow, not tensorflow-cpu, which installs the same
# `tensorflow` package: it is installed with --no-deps (TF2_NO_DEPS), or pip
# would unpack the full tensorflow wheel over tensorflow-cpu's files (`pip
# check` names that one unmet requirement). A script either imports tf_keras
# itself or sets TF_USE_LEGACY_KERAS=1 before importing tensorflow, which
# makes tf.keras resolve to tf_keras.
# TF 1.15.5 has wheels for CPython 3.5-3.7 only, hence pyenv's 3.7. Its
# metadata asks for protobuf>=3.6.1 with no upper bound, which lets pip pick
# protobuf 4, whose generated-code check refuses TF 1.15's _pb2 modules at
# import: protobuf<3.21 keeps a 3.x. numpy<1.19 repeats TF's own pin (as
# h5py<=2.10.0, also its own), so the set stays the one tested here. The
# 1.15.5 tensorflow wheel is not built with CUDA (tf.test.is_built_with_cuda()
# is False) and pulls in no GPU libraries.
# The package under test is not installed: the tests start ranks with these
# venvs' pythons from a davincirun of build/venv. pip's cache is left on
# (a warm cache saves the downloads). Safe to run again: a stamp holding the
# requirements and the interpreter skips a finished setup (in half a second).
#
#   bash scripts/tensorflow_env.sh                 set up both (prints each venv's python)
#   bash scripts/tensorflow_env.sh --tf2           only build/tf2-env  (--tf1: only build/tf1-env)
#   bash scripts/tensorflow_env.sh --clean [--tf2|--tf1]   remove them
#   TF2_BASE_PYTHON=..., TF1_BASE_PYTHON=...       other base interpreters (PYENV_ROOT, default ~/.pyenv)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

TF2_REQUIREMENTS=(tensorflow-cpu==2.21.0)
TF2_NO_DEPS=(tf-keras==2.21.0)
TF2_VERSION=2.21.0
TF1_REQUIREMENTS=(tensorflow==1.15.5 "protobuf<3.21" "numpy<1.19")
TF1_NO_DEPS=()
TF1_VERSION=1.15.5

source scripts/pyenv_python.sh

clean=0
envs=()
for arg in "$@"; do
  case $arg in
    --clean) clean=1 ;;
    --tf2) envs+=(tf2) ;;
    --tf1) envs+=(tf1) ;;
    *)
      echo "tensorflow_env: unknown argument $arg (--tf2, --tf1, --clean)" >&2
      exit 2
      ;;
  esac
done
((${#envs[@]})) || envs=(tf2 tf1)

if ((clean)); then
  for env in "${envs[@]}"; do rm -rf "$REPO/build/$env-env"; done
  exit 0
fi

# setup NAME BASE_PYTHON VERSION NO_DEPS REQUIREMENT...: make build/NAME-env
# unless its stamp matches: install the REQUIREMENTs, then the space-separated
# NO_DEPS without their dependencies; check that it imports tensorflow
# VERSION; print its python.
setup() {
  local name=$1 base=$2 version=$3 no_deps=$4
  shift 4
  local env_dir=$REPO/build/$name-env wanted
  wanted="$* ${no_deps:+--no-deps $no_deps }$("$base" -c 'import sys; print(sys.version)')"
  # find_spec, not an import: importing TF takes seconds.
  if [[ -f $env_dir/.stamp && $(<"$env_dir/.stamp") == "$wanted" ]] &&
    "$env_dir/bin/python" -c "import importlib.util as u; assert u.find_spec('tensorflow')" 2>/dev/null; then
    echo "$env_dir/bin/python"
    return 0
  fi
  rm -rf "$env_dir"
  "$base" -m venv "$env_dir"
  echo "tensorflow_env: installing $*${no_deps:+ $no_deps} into ${env_dir#"$REPO"/} (pip)" >&2
  "$env_dir/bin/python" -m pip install -q "$@" 2> >(grep -v "is ignored: it is neither" >&2)
  if [[ -n $no_deps ]]; then
    # shellcheck disable=SC2086 # a list of requirements without spaces
    "$env_dir/bin/python" -m pip install -q --no-deps $no_deps 2> >(grep -v "is ignored: it is neither" >&2)
  fi
  local got
  got=$("$env_dir/bin/python" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null | tail -1) || true
  if [[ $got != "$version" ]]; then
    echo "tensorflow_env: ${env_dir#"$REPO"/} does not import tensorflow $version (got '${got:-an error}'):" >&2
    "$env_dir/bin/python" -c 'import tensorflow' >&2 || true
    exit 1
  fi
  echo "$wanted" >"$env_dir/.stamp"
  echo "$env_dir/bin/python"
}

for env in "${envs[@]}"; do
  case $env in
    tf2)
      base=${TF2_BASE_PYTHON:-python3.11}
      if ! command -v "$base" >/dev/null; then
        echo "tensorflow_env: $base not found: the tensorflow-cpu 2.21.0 wheels used here are for CPython 3.11 (set TF2_BASE_PYTHON)" >&2
        exit 1
      fi
      setup tf2 "$base" "$TF2_VERSION" "${TF2_NO_DEPS[*]}" "${TF2_REQUIREMENTS[@]}"
      ;;
    tf1)
      base=${TF1_BASE_PYTHON:-$(pyenv_python 3.7)}
      if [[ -z $base ]] || ! command -v "$base" >/dev/null; then
        echo "tensorflow_env: no CPython 3.7 under $PYENV_ROOT/versions: TensorFlow 1.15.5 has wheels for CPython 3.5-3.7 only (pyenv install 3.7, or set TF1_BASE_PYTHON)" >&2
        exit 1
      fi
      setup tf1 "$base" "$TF1_VERSION" "${TF1_NO_DEPS[*]-}" "${TF1_REQUIREMENTS[@]}"
      ;;
  esac
done
