# Sourced by scripts/build_wheels.sh: checks everything the run will need
# before anything is built, for the architectures and versions asked
# ($archs, $pythons, $debian_check), and names the package that provides
# each missing thing; a run that lacks one stops at once rather than fail
# after minutes of building. Its tools from PyPI (scripts/requirements-wheels.txt)
# are installed by the run itself.
check_prerequisites() {
  local missing=() base=${PYTHON:-python3} v exe include has_pip arch suite
  need_command() {  # COMMAND DEBIAN-PACKAGE WHAT-FOR
    command -v "$1" >/dev/null || missing+=("$1 (Debian: $2), $3")
  }
  need_command "$base" python3 "makes the tools' venv build/wheel-tools/venv (or set PYTHON)"
  if command -v "$base" >/dev/null && ! "$base" -c 'import venv, ensurepip' 2>/dev/null; then
    missing+=("the venv module of $base (Debian: python3-venv), for build/wheel-tools/venv")
  fi
  need_command dpkg-query dpkg "finds the headers bundled into the sdist"
  local p
  for p in libfmt-dev nlohmann-json3-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p (Debian: $p), whose headers the sdist bundles (scripts/bundle_deps.sh)")
  done
  need_command tar tar "unpacks the sdist"
  need_command cmp diffutils "syncs the unpacked sdist"
  need_command readelf binutils "checks each ELF file's machine, libraries and glibc symbols"
  need_command column bsdextrautils "prints the closing table"

  # Each CPython from pyenv, with its headers (x86_64's and, patched, aarch64's)
  # and pip (which builds its module and installs its x86_64 wheel).
  for v in "${pythons[@]}"; do
    if ! exe=$(pyenv_python "$v"); then
      missing+=("CPython $v under $PYENV_ROOT/versions (pyenv: pyenv install $v)")
      continue
    fi
    # One interpreter start: its include directory, then whether it has pip.
    read -r include has_pip < <("$exe" -c '
import importlib.util, sysconfig
print(sysconfig.get_paths()["include"], importlib.util.find_spec("pip") is not None)' 2>/dev/null) || include=?
    [[ -f $include/Python.h && -f $include/pyconfig.h ]] ||
      missing+=("the headers of $exe (Python.h and pyconfig.h in $include; pyenv: pyenv install --force $v)")
    [[ $has_pip == True ]] || missing+=("pip of $exe ($exe -m ensurepip)")
  done

  for arch in "${archs[@]}"; do
    [[ $arch == aarch64 ]] || continue
    command -v qemu-aarch64-static >/dev/null || command -v qemu-aarch64 >/dev/null ||
      missing+=("qemu-aarch64-static (Debian: qemu-user-static), runs the aarch64 programs to check them")
    unzip -v >/dev/null 2>&1 || missing+=("unzip (Debian: unzip), takes the aarch64 programs out of their wheels")
    # Debian's root file systems not yet unpacked: bookworm arm64 (the glibc
    # qemu runs the programs with), and amd64 + arm64 of the suite of each
    # version the pyconfig.h check compares.
    local roots=(bookworm-arm64)
    if ((debian_check)); then
      for v in "${pythons[@]}"; do
        suite=${DEBIAN_SUITE[$v]:-}
        [[ -n $suite ]] && roots+=("$suite-amd64" "$suite-arm64")
      done
    fi
    local r needed=0
    for r in "${roots[@]}"; do [[ -f $work/debian/$r/.done ]] || needed=1; done
    if ((needed)); then
      need_command mmdebstrap mmdebstrap "unpacks Debian's arm64 glibc and libpython3.X-dev"
      [[ -n $(debian_mirror) ]] || missing+=("a Debian mirror (none in /etc/apt/sources.list*; set DEBIAN_MIRROR), for mmdebstrap")
    fi
  done

  if ((${#missing[@]})); then
    echo "build_wheels: missing, so nothing was built:" >&2
    printf '  - %s\n' "${missing[@]}" >&2
    exit 1
  fi
}
