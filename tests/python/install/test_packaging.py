"""The package's metadata agrees with itself: one version everywhere
(pyproject.toml, CMakeLists.txt, davincirunsdk.__version__, `davincirun
--version`, the installed distribution), classifiers for exactly the Python
versions requires-python admits up to the newest shipped, and a build that
never writes into the source tree (no scikit-build-core build-dir in it).
The `davincirun` a wheel puts on PATH is the compiled program itself, in
the wheel's scripts directory, with its supervisor beside it."""

import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
from conftest import REPO
from notebook_support import built_wheel

import davincirunsdk

NEWEST_SHIPPED = (3, 13)  # scripts/build_wheels.sh builds wheels up to this version
ELF = b"\x7fELF"


def read(name):
    with open(os.path.join(REPO, name), encoding="utf-8") as f:
        return f.read()


def section(toml, name):
    """The lines of one [name] table of a TOML text (enough for these keys)."""
    match = re.search(r"^\[%s\]\n(.*?)(?=^\[|\Z)" % re.escape(name), toml, re.M | re.S)
    assert match, "no [%s] in pyproject.toml" % name
    return match.group(1)


def project_value(key):
    match = re.search(r'^%s = "([^"]*)"' % key, section(read("pyproject.toml"), "project"), re.M)
    assert match, "no %s in [project]" % key
    return match.group(1)


VERSION = project_value("version")


def test_cmake_project_has_the_same_version():
    match = re.search(r"^project\(davincirun VERSION ([0-9.]+)", read("CMakeLists.txt"), re.M)
    assert match and match.group(1) == VERSION


def test_module_and_package_report_the_version():
    assert davincirunsdk.__version__ == VERSION


def test_davincirun_reports_the_version():
    davincirun = shutil.which("davincirun")
    if davincirun is None:
        pytest.skip("davincirun is not on PATH")
    out = subprocess.run([davincirun, "--version"], stdout=subprocess.PIPE, check=True, universal_newlines=True)
    assert out.stdout == "davincirun %s\n" % VERSION


def test_installed_distribution_has_the_version():
    assert installed_metadata().version("davincirunsdk") == VERSION


def test_classifiers_cover_exactly_the_supported_versions():
    match = re.fullmatch(r">=3\.(\d+)", project_value("requires-python"))
    assert match, "requires-python is not of the form >=3.N"
    oldest = int(match.group(1))
    classifiers = set(re.findall(r'"Programming Language :: Python :: (3\.\d+)"', section(read("pyproject.toml"),
                                                                                          "project")))
    assert classifiers == {"3.%d" % minor for minor in range(oldest, NEWEST_SHIPPED[1] + 1)}


def test_the_running_python_is_supported():
    oldest = int(project_value("requires-python")[len(">=3."):])
    assert (3, oldest) <= sys.version_info[:2] <= NEWEST_SHIPPED


def test_pip_install_builds_outside_the_tree():
    # scikit-build-core's default build directory is a new temporary one; a
    # build-dir inside the tree was once reused by a build while the tree
    # changed, and produced a module that did not match its Python files.
    assert not re.search(r"^build-dir\s*=", section(read("pyproject.toml"), "tool.scikit-build"), re.M)


def test_no_console_script_claims_davincirun():
    # A console script of that name would be a second bin/davincirun, a
    # Python one, clashing with the program in the wheel's scripts directory.
    toml = read("pyproject.toml")
    for table in ("project.scripts", "project.gui-scripts", 'project.entry-points."console_scripts"'):
        if re.search(r"^\[%s\]" % re.escape(table), toml, re.M):
            assert not re.search(r"^davincirun\s*=", section(toml, table), re.M), table


def installed_metadata():
    """importlib.metadata, once the davincirunsdk imported is known to be the
    installed distribution; skips otherwise (a build tree, CPython 3.7)."""
    try:
        from importlib import metadata
    except ImportError:  # CPython 3.7
        pytest.skip("importlib.metadata needs CPython 3.8")
    try:
        metadata.distribution("davincirunsdk")
    except metadata.PackageNotFoundError:
        pytest.skip("davincirunsdk runs from a build tree, not an installed distribution")
    location = os.path.realpath(os.path.dirname(davincirunsdk.__file__))
    if not location.startswith(os.path.realpath(sys.prefix)):
        pytest.skip("the davincirunsdk imported is not the installed one")
    return metadata


def installed_distribution_files():
    """The files of the installed davincirunsdk distribution (RECORD), or
    skips when the davincirunsdk imported is not an installed one."""
    return installed_metadata().files("davincirunsdk") or []


def test_the_wheel_puts_the_program_in_its_scripts_directory():
    """pip copies the .data/scripts files to <prefix>/bin unchanged, with
    their mode, and `pip uninstall` removes what RECORD lists."""
    wheel, why = built_wheel()
    if wheel is None:
        pytest.skip(why)
    scripts = "davincirunsdk-%s.data/scripts/" % VERSION
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        record = {line.split(",", 1)[0] for line in zf.read("davincirunsdk-%s.dist-info/RECORD" % VERSION)
                  .decode().splitlines()}
        for name in (scripts + "davincirun", scripts + "davincirun-supervisor",
                     "davincirunsdk/bin/davincirun-supervisor"):
            assert zf.read(name)[:4] == ELF, name
            assert (zf.getinfo(name).external_attr >> 16) & 0o111 == 0o111, "%s is not executable" % name
            assert name in record
        entry_points = "davincirunsdk-%s.dist-info/entry_points.txt" % VERSION
        assert entry_points not in names or "davincirun" not in zf.read(entry_points).decode()
    # The package keeps only the supervisor (for the Python API).
    assert "davincirunsdk/bin/davincirun" not in names
    assert not any(n.startswith("davincirunsdk/") and n.endswith("_cli.py") for n in names)


def test_the_installed_davincirun_is_the_program():
    # RECORD names the scripts directory's files relative to site-packages
    # (../../../bin/davincirun), the package's own inside it.
    files = installed_distribution_files()
    scripts = [f for f in files if ".." in f.parts and f.name in ("davincirun", "davincirun-supervisor")]
    assert sorted(f.name for f in scripts) == ["davincirun", "davincirun-supervisor"], files
    assert not [f for f in files if ".." not in f.parts and f.name == "davincirun"]
    for f in scripts:
        path = str(f.locate())
        with open(path, "rb") as program:
            assert program.read(4) == ELF, path
        assert os.access(path, os.X_OK), path
