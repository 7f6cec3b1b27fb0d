"""Shared fixtures: rank tables describing this machine, a guard proving
that no test leaves a process of its jobs behind, the notebook kernels
(notebook_support.py), the rank program of the output tests
(rank_writer.py) and test hosts in network namespaces (netns_support.py).

The tests are in one folder per stage of a job (rank_table, plan, process,
output, job, peers) and per surrounding (engines, frameworks, security,
install, repository); the modules they share are in support/, which this
file puts on sys.path for every folder. It also puts back the stop signals
a test run may have been started ignoring, and marks the quick tests."""

import importlib.util
import json
import os
import signal
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(HERE, "support"), os.path.join(REPO, "tests", "fault")]
from caller_signals import STOP_SIGNALS, restore_defaults  # noqa: E402
from notebook_support import KERNEL_NAMES, checked_kernel  # noqa: E402
from process_scan import MARKER_VARIABLE, process_environ, processes_with_marker  # noqa: E402,F401 (used by the tests)


def pytest_sessionstart(session):
    """The stop signals back at their defaults where this run was started
    ignoring them: by `nohup` (SIGHUP) or as a background job of a script
    (SIGINT, SIGQUIT). An ignored disposition survives fork() and exec(),
    so every davincirun, caller and rank the tests start would inherit it,
    and davincirun rightly keeps a signal ignored at its start: a test
    stopping a job with that signal would see it run on. A test that wants
    a signal ignored in a child ignores it there (preexec_fn), as a user
    does with nohup."""
    restore_defaults(STOP_SIGNALS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """os.environ after each test as it was before it, once every fixture
    (monkeypatch too) is torn down: the 0.1.x API sets RANK_TABLE_FILE,
    RANK_SIZE, RANK_START and MA_CURRENT_HOST_IP in the calling process by
    design, and a later test in the same pytest process (each worker runs
    many) would see them as its caller's environment."""
    saved = dict(os.environ)
    yield
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    """Marks `quick` every test that has none of the project's other markers
    (pyproject.toml: slow, notebook, fault, mindspore, multihost, each of
    them something more than this machine and a few seconds), so that
    `pytest -m quick` runs those alone and a new marker leaves them too."""
    others = [line.split(":")[0].strip() for line in config.getini("markers")]
    others.remove("quick")
    for item in items:
        if not any(item.get_closest_marker(name) for name in others):
            item.add_marker(pytest.mark.quick)


def write_rank_table(path, device_ids, server_id="127.0.0.1"):
    """A format 1.0 table with one server; rank i runs on device_ids[i]."""
    table = {
        "version": "1.0",
        "server_count": "1",
        "server_list": [
            {
                "server_id": server_id,
                "device": [{"device_id": str(d), "rank_id": str(r)} for r, d in enumerate(device_ids)],
            }
        ],
        "status": "completed",
    }
    with open(path, "w") as f:
        json.dump(table, f, indent=2)
    return str(path)


@pytest.fixture
def rank_table(tmp_path):
    """Factory: rank_table(n) writes a table of n devices 0..n-1 and returns its path."""

    def make(n=4, device_ids=None, name="rank_table.json"):
        return write_rank_table(tmp_path / name, device_ids if device_ids is not None else list(range(n)))

    return make


def framework_python(path, message, required_by):
    """`path` when it is an executable interpreter of a framework's venv.
    Missing, the test is skipped with `message`, unless the variable
    `required_by` is 1 (scripts/test.sh sets it): then that is a failure,
    so that the full test command never skips a framework quietly."""
    if not os.access(path, os.X_OK):
        if os.environ.get(required_by) == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def mindspore_python():
    """The interpreter of the MindSpore virtual environment
    (scripts/mindspore_env.sh: build/mindspore-env), or the one named by
    DAVINCIRUN_MINDSPORE_PYTHON; missing, framework_python() decides
    (DAVINCIRUN_REQUIRE_MINDSPORE)."""
    default = os.path.join(REPO, "build", "mindspore-env", "bin", "python")
    path = os.environ.get("DAVINCIRUN_MINDSPORE_PYTHON") or default
    return framework_python(path, "no MindSpore environment at %s: run bash scripts/mindspore_env.sh" % path,
                            "DAVINCIRUN_REQUIRE_MINDSPORE")


@pytest.fixture(autouse=True)
def device_lock_dir(tmp_path_factory, monkeypatch):
    """Every test's jobs lock their devices (DAVINCIRUN_LOCK_DIR) in a
    directory of their own, not in the machine's /tmp/davincirun-locks: the
    supervisor of the previous test's job may still be ending (its caller
    was SIGKILLed), and another run of the suite, a benchmark or a real job
    on this machine may use the same device ids at the same time."""
    path = tmp_path_factory.mktemp("device-locks")
    monkeypatch.setenv("DAVINCIRUN_LOCK_DIR", str(path))
    return path


@pytest.fixture(autouse=True)
def no_cache_disk(monkeypatch):
    """No test writes to a machine's /cache: the cache disk is off
    (DAVINCIRUN_CACHE_ROOT=off) unless a test points it at a directory of
    its own (test_platform_env.py)."""
    monkeypatch.setenv("DAVINCIRUN_CACHE_ROOT", "off")


@pytest.fixture
def job_env():
    """Variables to pass as env= to every job of a test; after the test, fails
    if any process carrying them is still alive (and kills it)."""
    marker = uuid.uuid4().hex
    yield {MARKER_VARIABLE: marker}
    deadline = time.monotonic() + 3.0
    left = processes_with_marker(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = processes_with_marker(marker)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not left, "processes left behind by the test: %s" % left


def needs_modules(*names):
    """Skips a test whose ranks import `names` where one is not installed.
    Looked up, not imported: torch alone takes seconds to import, which
    every collection of the suite would pay, deselected or not."""
    missing = [name for name in names if importlib.util.find_spec(name) is None]
    return pytest.mark.skipif(bool(missing), reason="not installed: %s" % ", ".join(missing))


def assert_gone(pids):
    """Each of `pids` (reaped processes of this test) no longer exists."""
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def python_command(code):
    """argv running `code` with this interpreter (no shell involved)."""
    return [sys.executable, "-c", code]


@pytest.fixture(params=KERNEL_NAMES)
def kernel_name(request):
    """A kernelspec name, once per ipykernel major version (notebook_support.py)."""
    return checked_kernel(request.param)


@pytest.fixture
def child(tmp_path):
    """argv prefix running the rank program of rank_writer.py, and its side directory."""
    from rank_writer import rank_program  # it imports this module

    return rank_program(tmp_path)


@pytest.fixture
def netns_hosts(tmp_path):
    """Three test hosts on a bridge (netns_support.py); skips without root or
    network namespaces. After the test every process on them is killed and
    the namespaces and the bridge are gone."""
    from netns_support import Network

    network = Network(3, tmp_path / "hosts")
    yield network
    network.close()


@pytest.fixture(params=["pidfd", "sigchld"])
def tracking(request, monkeypatch):
    """The launcher's process-tracking mode; inherited by every subprocess."""
    monkeypatch.setenv("DAVINCIRUN_PROCESS_TRACKING", request.param)
    return request.param
