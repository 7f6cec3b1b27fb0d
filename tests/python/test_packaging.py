"""The package's metadata agrees with itself: one version everywhere
(pyproject.toml, CMakeLists.txt, davincirunsdk.__version__, `davincirun
--version`, the installed distribution), classifiers for exactly the Python
versions requires-python admits up to the newest shipped, and a build that
never writes into the source tree (no scikit-build-core build-dir in it)."""

import os
import re
import shutil
import subprocess
import sys

import pytest

import davincirunsdk

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NEWEST_SHIPPED = (3, 13)  # scripts/build_wheels.sh builds wheels up to this version


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
    try:
        from importlib import metadata
    except ImportError:  # CPython 3.7
        pytest.skip("importlib.metadata needs CPython 3.8")
    try:
        installed = metadata.version("davincirunsdk")
    except metadata.PackageNotFoundError:
        pytest.skip("davincirunsdk runs from a build tree, not an installed distribution")
    location = os.path.realpath(os.path.dirname(davincirunsdk.__file__))
    if not location.startswith(os.path.realpath(sys.prefix)):
        pytest.skip("the davincirunsdk imported is not the installed one")
    assert installed == VERSION


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
