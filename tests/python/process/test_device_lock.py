"""Two jobs on the same devices of one machine: the second is refused at
once with DeviceBusyError, before it starts anything, naming the devices and
the job that holds them; a job's locks go with it, even when it is killed.

Every test locks in its own directory (conftest's device_lock_dir)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import MARKER_VARIABLE, processes_with_marker, python_command

from davincirunsdk import DavincirunError, DeviceBusyError, LaunchConfigError, start_distributed_train

DAVINCIRUN = shutil.which("davincirun")
needs_cli = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")

SLEEP = python_command("import time; time.sleep(120)")

# argv: KWARGS (JSON) for start_distributed_train; prints the supervisor's pid, then waits.
CALLER = r"""
import json, sys
from davincirunsdk import start_distributed_train
job = start_distributed_train(**json.loads(sys.argv[1]))
print(job.supervisor_pid, flush=True)
job.wait()
"""


def start_sleeping(tmp_path, table, job_env, name="first"):
    return start_distributed_train(SLEEP, log_dir=str(tmp_path / name), rank_table=table, env=job_env,
                                   grace_period=1, output_notebook=False)


def stop(job):
    job.terminate()
    job.wait()


def gone(pid):
    """The process has exited (a zombie has released its locks too)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except FileNotFoundError:
        return True


def test_a_second_job_on_a_busy_device_is_refused_at_once(tmp_path, rank_table, job_env, device_lock_dir):
    first = start_sleeping(tmp_path, rank_table(2, name="first.json"), job_env)  # devices 0, 1
    try:
        description = (device_lock_dir / "device1.lock").read_text()
        assert description.startswith("pid=%d started=" % first.supervisor_pid)
        assert description.endswith(" job=%s command=%s -c 'import time; time.sleep(120)'\n"
                                    % (first.job_id, sys.executable))
        started = time.monotonic()
        with pytest.raises(DeviceBusyError) as info:
            start_distributed_train(SLEEP, log_dir=str(tmp_path / "second"),
                                    rank_table=rank_table(device_ids=[2, 1], name="second.json"), env=job_env,
                                    output_notebook=False)
        assert time.monotonic() - started < 2
        error = info.value
        assert isinstance(error, LaunchConfigError) and isinstance(error, ValueError)
        assert isinstance(error, DavincirunError)
        assert error.devices == [1]
        assert error.holder_pid == first.supervisor_pid
        assert error.holder_description.startswith("job %s, started " % first.job_id)
        assert str(error).startswith("device 1 is in use by another job: pid %d (job %s, started "
                                     % (first.supervisor_pid, first.job_id))
        first_line, hint = str(error).split("\n")
        assert first_line.endswith("Z): %s -c 'import time; time.sleep(120)'; wait for it to end, or run on other "
                                   "devices (devices= / --devices)" % sys.executable)
        # The holder is a job of this very process (e.g. an earlier notebook cell's): say what to do.
        assert hint == ("(that is job %s, started by this process, e.g. by an earlier cell: "
                        "davincirunsdk.running_jobs() returns it; call its terminate() or wait() first)"
                        % first.job_id)
        # It started nothing and created nothing.
        assert not (tmp_path / "second").exists()
        assert sorted(processes_with_marker(job_env[MARKER_VARIABLE])) == sorted(first.pids)
        assert first.poll() is None
    finally:
        stop(first)


@pytest.mark.parametrize("victim", ["caller", "supervisor"])
def test_a_killed_job_frees_its_devices(tmp_path, rank_table, job_env, victim):
    """SIGKILL its caller (the supervisor stops the ranks and ends), or the
    supervisor itself (a crash: the kernel drops its locks)."""
    table = rank_table(2)
    kwargs = {"command": SLEEP, "log_dir": str(tmp_path / "first"), "rank_table": table, "env": job_env,
              "grace_period": 1, "output_notebook": False}
    proc = subprocess.Popen([sys.executable, "-c", CALLER, json.dumps(kwargs)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        supervisor = int(proc.stdout.readline())
        with pytest.raises(DeviceBusyError) as info:
            start_sleeping(tmp_path, table, job_env, "refused")
        assert info.value.holder_pid == supervisor
        os.kill(proc.pid if victim == "caller" else supervisor, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not gone(supervisor) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert gone(supervisor)
        second = start_sleeping(tmp_path, table, job_env, "second")  # at once: nothing to wait for
        assert second.poll() is None
        stop(second)
    finally:
        proc.kill()
        proc.wait()


@needs_cli
def test_cli_exits_2_naming_the_devices_and_the_holder(tmp_path, rank_table, job_env):
    first = start_sleeping(tmp_path, rank_table(2, name="first.json"), job_env)
    try:
        proc = subprocess.run(
            [DAVINCIRUN, "--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE]),
             "-r", rank_table(device_ids=[1, 0], name="second.json"), "true"],
            cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, timeout=30)
        assert proc.returncode == 2
        assert proc.stderr.startswith("davincirun: devices 0, 1 are in use by another job: pid %d (job %s, started "
                                      % (first.supervisor_pid, first.job_id))
        assert not (tmp_path / "log").exists()
        assert first.poll() is None
    finally:
        stop(first)


def test_locking_can_be_turned_off(tmp_path, rank_table, job_env, monkeypatch):
    monkeypatch.setenv("DAVINCIRUN_LOCK_DIR", "off")
    table = rank_table(1)
    first = start_sleeping(tmp_path, table, job_env)
    try:
        second = start_sleeping(tmp_path, table, job_env, "second")
        stop(second)
    finally:
        stop(first)


def test_an_unusable_lock_directory_is_a_config_error(tmp_path, rank_table, job_env, monkeypatch):
    (tmp_path / "real").mkdir()
    os.symlink(str(tmp_path / "real"), str(tmp_path / "link"))
    monkeypatch.setenv("DAVINCIRUN_LOCK_DIR", str(tmp_path / "link"))
    with pytest.raises(LaunchConfigError) as info:
        start_sleeping(tmp_path, rank_table(1), job_env)
    assert not isinstance(info.value, DeviceBusyError)
    assert "the device lock directory '%s' is a symbolic link" % (tmp_path / "link") in str(info.value)
    assert not (tmp_path / "first").exists()
    assert os.listdir(str(tmp_path / "real")) == []


def fake_devices(directory, ids):
    """A device tree of regular files davinci<N> (DAVINCIRUN_DEVICE_DIR), as a machine with these NPUs has."""
    directory.mkdir()
    for i in ids:
        (directory / ("davinci%d" % i)).write_text("")
    return str(directory)


NO_NPU = "none: this machine has no NPU (no /dev/davinciN), so CPU jobs never refuse each other"


@needs_cli
@pytest.mark.parametrize(
    "value, npu, shown",
    [(None, True, "/tmp/davincirun-locks"), ("", True, "/tmp/davincirun-locks"), ("off", True, "off, as "),
     (None, False, NO_NPU), ("", False, NO_NPU), ("named", False, "named")],
)
def test_dry_run_shows_the_lock_directory(tmp_path, rank_table, monkeypatch, value, npu, shown):
    if value is None:
        monkeypatch.delenv("DAVINCIRUN_LOCK_DIR")
    elif value == "named":  # a directory named explicitly is used even without NPUs
        (tmp_path / "named").mkdir()
        monkeypatch.setenv("DAVINCIRUN_LOCK_DIR", str(tmp_path / "named"))
        shown = str(tmp_path / "named")
    else:
        monkeypatch.setenv("DAVINCIRUN_LOCK_DIR", value)
    if npu:
        monkeypatch.setenv("DAVINCIRUN_DEVICE_DIR", fake_devices(tmp_path / "dev", [977]))
    elif os.path.exists("/dev/davinci0"):
        pytest.skip("this machine has NPUs")
    # A device no real job here uses: a dry run checks the (shared) default directory's lock.
    proc = subprocess.run([DAVINCIRUN, "--dry-run", "-r", rank_table(device_ids=[977]), "true"], cwd=str(tmp_path),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "device locks: %s" % shown in proc.stdout


def test_cpu_jobs_on_a_machine_without_npus_never_refuse_each_other(tmp_path, rank_table, job_env, monkeypatch):
    """Two notebooks, two users, a test suite: the same "devices" 0 and 1,
    the default lock directory, and no NPU device file: both jobs run."""
    if os.path.exists("/dev/davinci0"):
        pytest.skip("this machine has NPUs")
    monkeypatch.delenv("DAVINCIRUN_LOCK_DIR")
    table = rank_table(2)
    first = start_sleeping(tmp_path, table, job_env)
    try:
        assert first.plan.device_lock_dir == "" and first.plan.device_locks_off.startswith(NO_NPU)
        second = start_sleeping(tmp_path, table, job_env, "second")
        try:
            assert second.poll() is None and first.poll() is None
        finally:
            stop(second)
    finally:
        stop(first)


@needs_cli
def test_two_nproc_2_commands_at_once_both_run_on_a_machine_without_npus(tmp_path, job_env, monkeypatch):
    if os.path.exists("/dev/davinci0"):
        pytest.skip("this machine has NPUs")
    monkeypatch.delenv("DAVINCIRUN_LOCK_DIR")
    env = dict(os.environ, **job_env)
    # Each rank waits until both jobs' ranks are up: they ran side by side.
    code = ("import os, sys, time\n"
            "open(os.path.join(sys.argv[1], os.environ['JOB_ID'] + os.environ['RANK']), 'w').close()\n"
            "deadline = time.time() + 30\n"
            "while len(os.listdir(sys.argv[1])) < 4 and time.time() < deadline: time.sleep(0.05)\n"
            "sys.exit(0 if len(os.listdir(sys.argv[1])) == 4 else 5)\n")
    (tmp_path / "up").mkdir()
    jobs = [subprocess.Popen([DAVINCIRUN, "--nproc", "2", "-l", str(tmp_path / name), sys.executable, "-c", code,
                              str(tmp_path / "up")], env=env, cwd=str(tmp_path), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    results = [job.communicate(timeout=60) for job in jobs]
    for job, (_out, err) in zip(jobs, results):
        assert job.returncode == 0, err
        assert "in use by another job" not in err


def test_with_npu_device_files_the_default_directory_still_refuses(tmp_path, rank_table, job_env, monkeypatch):
    monkeypatch.delenv("DAVINCIRUN_LOCK_DIR")
    monkeypatch.setenv("DAVINCIRUN_DEVICE_DIR", fake_devices(tmp_path / "dev", [961, 962]))
    table = rank_table(device_ids=[961, 962])  # ids no real job here uses, in the shared default directory
    first = start_sleeping(tmp_path, table, job_env)
    try:
        assert first.plan.device_lock_dir == "/tmp/davincirun-locks" and first.plan.device_locks_off == ""
        with pytest.raises(DeviceBusyError) as info:
            start_sleeping(tmp_path, table, job_env, "second")
        assert info.value.devices == [961, 962]
    finally:
        stop(first)


@needs_cli
def test_dry_run_says_when_the_devices_are_busy_and_locks_nothing(tmp_path, rank_table, job_env, device_lock_dir):
    """A dry run answers "would it start?": devices held by another job make
    it exit 2 naming them and the holder, after the plan; free devices are
    not locked, and no lock file is created."""
    table = rank_table(device_ids=[0, 1, 2], name="dry.json")
    dry_run = [DAVINCIRUN, "--dry-run", "-r", table, "true"]
    proc = subprocess.run(dry_run, cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(str(device_lock_dir))) == []
    first = start_sleeping(tmp_path, rank_table(device_ids=[1, 2], name="first.json"), job_env)
    try:
        proc = subprocess.run(dry_run, cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=30)
    finally:
        stop(first)
    assert proc.returncode == 2
    assert "rank 2 (local rank 2): physical device 2" in proc.stdout  # the plan comes first
    assert ("devices 1, 2 are in use by another job: pid %d (job %s, started " % (first.supervisor_pid, first.job_id)
            in proc.stderr)
    assert not (device_lock_dir / "device0.lock").exists()
