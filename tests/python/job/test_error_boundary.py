"""Every error the C++ core throws reaches Python through the module
davincirunsdk._core as its own class, with its details, and Python
exceptions raised inside the core's callbacks come back out through the
core's C++ frames unchanged. What this checks is the C++ runtime the module
and the core were built with: the wheels link LLVM's libc++ statically
(scripts/build_wheels.sh) where a build from source uses the system's
libstdc++, and a mismatch in how exceptions are thrown, caught or unwound
shows up here as a crash or as the wrong exception.

The other tests meet these errors too, one feature at a time; here each
kind is raised once, from a real call into the core, with nothing faked.
(OptionTypeError is raised by the Python layer before the core is called.)
"""

import errno
import json
import os
import signal
import sys
import threading

import pytest

import davincirunsdk
from davincirunsdk import (
    DavincirunError,
    DeviceBusyError,
    DistributedRuntimeError,
    LaunchConfigError,
    LauncherSystemError,
    RankTableError,
    SpawnError,
    _core,
    start_and_wait_distributed_train,
    start_distributed_train,
)


def launch(command, tmp_path, table, job_env, **kwargs):
    """Runs a job of `command` and waits for it (no notebook display)."""
    return start_and_wait_distributed_train(command, log_dir=str(tmp_path / "log"), rank_table=table, env=job_env,
                                            output_notebook=False, random_cache_dir=False, **kwargs)


def test_rank_table_error_keeps_its_details():
    with pytest.raises(RankTableError) as info:
        _core.parse_rank_table('{"version": "1.0", "server_list": "x"}', "table.json")
    e = info.value
    assert isinstance(e, (DavincirunError, ValueError))
    assert (e.kind, e.source, e.pointer) == ("shape", "table.json", "/server_list")
    assert str(e).startswith("table.json: /server_list: ")


def test_option_error_is_a_launch_config_error_naming_the_option(tmp_path, rank_table, job_env):
    with pytest.raises(LaunchConfigError) as info:
        launch(["true"], tmp_path, rank_table(1), job_env, grace_period=-1)
    assert info.value.option == "grace_period"
    assert "grace_period" in str(info.value)


def test_config_error_without_an_option(tmp_path, job_env):
    # Two servers, neither of them this machine: the core's plan refuses it.
    servers = [{"server_id": "192.0.2.%d" % (7 + i), "device": [
        {"device_id": "0", "device_ip": "192.0.2.%d" % (17 + i), "rank_id": str(i)}]} for i in range(2)]
    table = tmp_path / "elsewhere.json"
    table.write_text(json.dumps({"version": "1.0", "server_count": "2", "status": "completed",
                                 "server_list": servers}))
    with pytest.raises(LaunchConfigError) as info:
        launch(["true"], tmp_path, str(table), job_env)
    assert type(info.value) is LaunchConfigError
    assert "192.0.2.7" in str(info.value)


def test_spawn_error_from_the_supervisor_process(tmp_path, rank_table, job_env):
    # Thrown in davincirun-supervisor, sent over the lifeline, thrown again
    # in the launcher's C++ and translated there.
    missing = str(tmp_path / "no-such-program")
    with pytest.raises(SpawnError) as info:
        launch([missing], tmp_path, rank_table(2), job_env)
    e = info.value
    assert isinstance(e, (DavincirunError, RuntimeError))
    assert (e.rank, e.os_errno) == (0, errno.ENOENT)
    assert missing in e.command and missing in str(e)


def test_device_busy_error_names_the_holder(tmp_path, rank_table, job_env):
    table = rank_table(2)
    first = start_distributed_train([sys.executable, "-c", "import time; time.sleep(60)"],
                                    log_dir=str(tmp_path / "first"), rank_table=table, env=job_env, grace_period=1,
                                    output_notebook=False, random_cache_dir=False)
    try:
        with pytest.raises(DeviceBusyError) as info:
            launch(["true"], tmp_path, table, job_env)
        e = info.value
        assert isinstance(e, LaunchConfigError)
        assert (e.devices, e.holder_pid) == ([0, 1], first.supervisor_pid)
        assert first.job_id in e.holder_description
    finally:
        first.terminate()
        first.wait(raise_exception=False)


def test_launcher_system_error_carries_errno(tmp_path, rank_table, job_env, monkeypatch):
    # The working directory removed under the caller: resolving work_dir "."
    # fails in the core (realpath: ENOENT), an error of the system, not of
    # the options.
    table = rank_table(1)
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(LauncherSystemError) as info:
        launch(["true"], tmp_path, table, job_env, work_dir=".")
    e = info.value
    assert isinstance(e, (DavincirunError, OSError))
    assert e.os_errno == errno.ENOENT


def test_distributed_runtime_error_from_the_job_result(tmp_path, rank_table, job_env):
    code = "import os, sys; sys.exit(3 if os.environ['RANK_ID'] == '1' else 0)"
    with pytest.raises(DistributedRuntimeError) as info:
        launch([sys.executable, "-c", code], tmp_path, rank_table(2), job_env)
    assert isinstance(info.value, RuntimeError)
    assert "rank 1" in str(info.value) and "exit code 3" in str(info.value)


class Refusing:
    """A stderr whose write raises: the core's progress callback calls it."""

    def write(self, text):
        raise UnicodeError("refused: " + text)

    def flush(self):
        pass


def test_python_exception_from_a_callback_crosses_the_core(tmp_path, monkeypatch):
    # wait_for_rank_table reports progress through sys.stderr.write from
    # inside the core's wait loop: the exception unwinds the core's frames.
    monkeypatch.setattr(sys, "stderr", Refusing())
    with pytest.raises(UnicodeError) as info:
        _core.wait_for_rank_table(str(tmp_path / "missing.json"), 5.0)
    assert "waiting for rank table" in str(info.value)


def test_keyboard_interrupt_while_the_core_waits(tmp_path):
    # SIGINT reaches the Python handler through the core's check (the GIL is
    # released while it waits) and KeyboardInterrupt unwinds the core.
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            _core.wait_for_rank_table(str(tmp_path / "missing.json"), 30.0)
    finally:
        timer.cancel()


def test_the_module_is_this_package():
    assert _core.__version__ == davincirunsdk.__version__
