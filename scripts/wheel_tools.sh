#!/usr/bin/env bash
# Sourced by scripts/build_sdist.sh and scripts/build_wheels.sh: makes (once,
# and again when scripts/requirements-wheels.txt changes) the venv
# build/wheel-tools/venv holding their tools, and puts it first on PATH.
WHEEL_TOOLS=$PWD/build/wheel-tools/venv
wheel_tools_setup() {
  local wanted
  wanted=$(cat scripts/requirements-wheels.txt | sha256sum | cut -c1-64)
  if [[ ! -x $WHEEL_TOOLS/bin/python || ! -f $WHEEL_TOOLS/.requirements ||
    $(<"$WHEEL_TOOLS/.requirements") != "$wanted" ]]; then
    echo "wheel-tools: installing scripts/requirements-wheels.txt into ${WHEEL_TOOLS#"$PWD"/}"
    rm -rf "$WHEEL_TOOLS"
    "${PYTHON:-python3}" -m venv "$WHEEL_TOOLS"
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$WHEEL_TOOLS/bin/python" -m pip install -q -r scripts/requirements-wheels.txt \
      2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
    echo "$wanted" >"$WHEEL_TOOLS/.requirements"
  fi
  export PATH=$WHEEL_TOOLS/bin:$PATH
}
