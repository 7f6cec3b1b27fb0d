# Sourced: pyenv_python X.Y prints the newest installed X.Y.Z interpreter of
# pyenv (under $PYENV_ROOT, default ~/.pyenv), or nothing when there is none.
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}

pyenv_python() {
  local dir
  dir=$(ls -d "$PYENV_ROOT"/versions/"$1".* 2>/dev/null | grep -E "/$1\.[0-9]+$" | sort -V | tail -1 || true)
  [[ -n $dir && -x $dir/bin/python$1 ]] && echo "$dir/bin/python$1"
  return 0
}
