"""A job's life when the notebook kernel running it is interrupted (Jupyter's
stop button), killed outright (SIGKILL) or restarted: real kernels
(ipykernel 6 and 7, from scripts/notebook_env.sh) driven by hand through
jupyter_client, real ranks started by the kernel's own interpreter.

Every job here has two ranks (devices 0 and 1). Each rank starts a child
that sleeps (rank 0's ignores SIGTERM), rank 1 also a double-forked setsid()
daemon, writes <ready dir>/ready.<rank> naming them all, prints a ready line
and sleeps: the test knows every process of the job and that it is up
before it acts. Afterwards nothing carrying the test's marker (job_env) may
be alive, nor the job's davincirun-supervisor, and the devices must be free
for the next job.
"""

import os
import signal
import time

import pytest
from conftest import MARKER_VARIABLE, processes_with_marker, python_command
from notebook_kernel import Execution, kernel_pid, run_cell, running_kernel

from davincirunsdk import DeviceBusyError, start_and_wait_distributed_train, start_distributed_train

# Real Jupyter kernels (scripts/notebook_env.sh): run with -m notebook, leave out with -m "not notebook".
pytestmark = pytest.mark.notebook

GRACE = 2.0  # the jobs' grace period (SIGTERM -> SIGKILL), seconds

IMPORTS = "import os, sys\nfrom davincirunsdk import start_and_wait_distributed_train, start_distributed_train"

# Every rank: a child (waited for until it runs, so that rank 0's really
# ignores SIGTERM), rank 1 also a setsid() daemon (a grandchild whose parent
# exits: an orphan in a session of its own), then the ready file
# "<rank pid> <its parent: the supervisor> <child pid> [<daemon pid>]".
SLOW_RANK = """\
import os, signal, subprocess, sys, time
ready_dir = %r
rank = os.environ['RANK_ID']
child_code = ('import signal, time\\n'
              + ('signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n' if rank == '0' else '')
              + 'print("child up", flush=True)\\n'
              + 'time.sleep(120)\\n')
child = subprocess.Popen([sys.executable, '-c', child_code], stdout=subprocess.PIPE)
child.stdout.readline()
pids = [os.getpid(), os.getppid(), child.pid]
if rank == '1':
    daemon_file = os.path.join(ready_dir, 'daemon')
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            with open(daemon_file + '.tmp', 'w') as f:
                f.write(str(os.getpid()))
            os.rename(daemon_file + '.tmp', daemon_file)
            time.sleep(120)
        os._exit(0)
    os.waitpid(middle, 0)
    deadline = time.monotonic() + 20
    while not os.path.exists(daemon_file) and time.monotonic() < deadline:
        time.sleep(0.01)
    with open(daemon_file) as f:
        pids.append(int(f.read()))
path = os.path.join(ready_dir, 'ready.' + rank)
with open(path + '.tmp', 'w') as f:
    f.write(' '.join(map(str, pids)))
os.rename(path + '.tmp', path)
print('lifecycle-ready rank', rank, flush=True)
time.sleep(120)
"""

QUICK_RANK = "import os\nprint('quick rank', os.environ['RANK_ID'])\n"


def setup_cell(ready_dir):
    """Imports, and `code` (what the ranks run) = SLOW_RANK; QUICK = QUICK_RANK."""
    return IMPORTS + "\nSLOW = %r\nQUICK = %r\ncode = SLOW" % (SLOW_RANK % str(ready_dir), QUICK_RANK)


def launch_cell(function, table, log_dir, env):
    """Source of `function([sys.executable, '-c', code], ...)` (code: a variable
    of the kernel), assigned to `rc` or `job`."""
    target = "rc" if function == "start_and_wait_distributed_train" else "job"
    return "%s = %s([sys.executable, '-c', code], rank_table=%r, log_dir=%r, env=%r, grace_period=%r, " \
           "output_notebook=True)" % (target, function, table, log_dir, env, GRACE)


def state(pid):
    """The process's state letter from /proc, None when there is no such process."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except OSError:
        return None


def alive(pid):
    return state(pid) not in (None, "Z", "X")


def read_pids(path):
    with open(path) as f:
        return [int(word) for word in f.read().split()]


def wait_until_ready(ready_dir, cell=None, timeout=30.0):
    """Waits for both ranks' ready files: {"ranks", "supervisor", "children",
    "daemon"} (pids). Reads the cell's IOPub meanwhile, failing early when it
    ended."""
    deadline = time.monotonic() + timeout
    paths = [os.path.join(ready_dir, "ready.%d" % rank) for rank in range(2)]
    while not all(os.path.exists(p) for p in paths):
        assert time.monotonic() < deadline, "the ranks did not come up within %s s" % timeout
        if cell is not None:
            assert not cell.read(0.05), "the cell ended before the ranks were up: %s\n%s" % (
                cell.errors(), cell.text())
        else:
            time.sleep(0.05)
    found = [read_pids(p) for p in paths]
    supervisors = {entry[1] for entry in found}
    assert len(supervisors) == 1, "the ranks have different parents: %s" % found
    return {
        "ranks": [entry[0] for entry in found],
        "supervisor": supervisors.pop(),
        "children": [entry[2] for entry in found],
        "daemon": found[1][3],
    }


def check_job_running(procs, marker):
    """Every process of the job is alive and carries the marker; the daemon
    is in a session of its own."""
    started = procs["ranks"] + procs["children"] + [procs["daemon"]]
    assert set(started) <= set(processes_with_marker(marker)), (procs, processes_with_marker(marker))
    assert alive(procs["supervisor"])
    # The daemon left rank 1's session (and so its process group) by setsid().
    assert os.getsid(procs["daemon"]) != os.getsid(procs["ranks"][1])


def wait_until_gone(marker, supervisor, within):
    """Seconds until no process carries the marker and the supervisor is gone
    (or a zombie nobody reaps yet); fails after `within` seconds, naming what is
    left."""
    start = time.monotonic()
    while True:
        left = processes_with_marker(marker)
        if not left and not alive(supervisor):
            return time.monotonic() - start
        if time.monotonic() - start > within:
            raise AssertionError(
                "still alive %.1f s later: processes of the job %s, supervisor %d: %s"
                % (within, left, supervisor, state(supervisor)))
        time.sleep(0.02)


def run_quick_job_here(table, log_dir, env):
    """A short job on the same devices from this (the test's) process, with
    the same DAVINCIRUN_LOCK_DIR as the kernel: the devices are free."""
    try:
        return start_and_wait_distributed_train(
            python_command("print('devices free')"), rank_table=table, log_dir=log_dir, env=env,
            output_notebook=False)
    except DeviceBusyError as e:
        raise AssertionError("the devices are still locked after the kernel's job ended: %s" % e) from e


def assert_devices_busy_now(table, log_dir, env, supervisor):
    """While the kernel's job runs, its supervisor holds its devices' locks in
    the lock dir the test process uses too: the later 'devices free' check
    means something."""
    with pytest.raises(DeviceBusyError) as caught:
        start_distributed_train(python_command("pass"), rank_table=table, log_dir=log_dir, env=env,
                                output_notebook=False)
    assert (caught.value.devices, caught.value.holder_pid) == ([0, 1], supervisor)


def check_ok(reply, cell):
    assert reply["status"] == "ok", "cell failed: %s: %s\n%s" % (
        reply.get("ename"), reply.get("evalue"), cell.text())


def run_ok(kc, code):
    """Runs `code` to its end and checks it raised nothing; returns its Execution."""
    reply, cell = run_cell(kc, code)
    check_ok(reply, cell)
    return cell


# ---------------------------------------------------------------- interrupt


def test_interrupting_the_cell_stops_the_job_and_the_same_cell_runs_again(
        kernel_name, tmp_path, rank_table, job_env):
    marker = job_env[MARKER_VARIABLE]
    ready_dir = tmp_path / "ready"
    ready_dir.mkdir()
    table = rank_table(2)
    launch = launch_cell("start_and_wait_distributed_train", table, str(tmp_path / "log"), job_env)
    with running_kernel(kernel_name, cwd=tmp_path) as (km, kc):
        run_ok(kc, setup_cell(ready_dir))

        cell = Execution(kc, launch)
        procs = wait_until_ready(str(ready_dir), cell)
        check_job_running(procs, marker)
        # The cell shows the running job's output live.
        for rank in range(2):
            assert cell.wait_for_text("lifecycle-ready rank %d" % rank, timeout=10), cell.text(displays=True)

        interrupted = time.monotonic()
        km.interrupt_kernel()  # SIGINT to the kernel, as Jupyter's stop button
        reply = cell.wait(timeout=GRACE + 10)
        assert (reply["status"], reply.get("ename")) == ("error", "KeyboardInterrupt"), reply
        assert [ename for ename, _ in cell.errors()] == ["KeyboardInterrupt"]
        # Everything, the SIGTERM-ignoring child and the daemon included, is
        # gone within the grace period after the interrupt.
        wait_until_gone(marker, procs["supervisor"], within=GRACE - (time.monotonic() - interrupted))
        # The cell said what the stop does, in the notebook's words.
        assert ("[davincirun] stop requested: stopping 2 rank(s) (SIGTERM); SIGKILL in %g s, or at once on a "
                "second interrupt (the stop button)\n" % GRACE) in cell.text(displays=True)

        # The same cell again, at once, in the same kernel: the devices are
        # free (no DeviceBusyError), the job runs and returns 0.
        run_ok(kc, "code = QUICK")
        cell = run_ok(kc, launch)
        assert "quick rank 0" in cell.text(displays=True) and "quick rank 1" in cell.text(displays=True)
        cell = run_ok(kc, "print('rc', rc)")
        assert cell.text() == "rc 0\n"


# ---------------------------------------------------------------- SIGKILL


@pytest.mark.parametrize("function", ["start_and_wait_distributed_train", "start_distributed_train"],
                         ids=["waiting-cell", "unwaited-job"])
def test_killing_the_kernel_stops_everything_and_frees_the_devices(
        kernel_name, tmp_path, rank_table, job_env, function):
    marker = job_env[MARKER_VARIABLE]
    ready_dir = tmp_path / "ready"
    ready_dir.mkdir()
    table = rank_table(2)
    with running_kernel(kernel_name, cwd=tmp_path) as (km, kc):
        run_ok(kc, setup_cell(ready_dir))
        cell = Execution(kc, launch_cell(function, table, str(tmp_path / "log"), job_env))
        if function == "start_distributed_train":
            check_ok(cell.wait(timeout=30), cell)  # the cell is over; the job runs on
            procs = wait_until_ready(str(ready_dir))
        else:
            procs = wait_until_ready(str(ready_dir), cell)  # while the cell runs
        check_job_running(procs, marker)
        assert_devices_busy_now(table, str(tmp_path / "busy-log"), job_env, procs["supervisor"])

        pid = kernel_pid(km)
        os.kill(pid, signal.SIGKILL)  # the kernel process the manager started
        km.provisioner.process.wait(timeout=10)  # reaped: it is dead
        wait_until_gone(marker, procs["supervisor"], within=5.0)
    assert run_quick_job_here(table, str(tmp_path / "log-after"), job_env) == 0


# ---------------------------------------------------------------- restart


@pytest.mark.parametrize("now", [True, False], ids=["restart-now", "restart-graceful"])
def test_restarting_the_kernel_stops_an_unwaited_job(kernel_name, tmp_path, rank_table, job_env, now):
    marker = job_env[MARKER_VARIABLE]
    ready_dir = tmp_path / "ready"
    ready_dir.mkdir()
    table = rank_table(2)
    with running_kernel(kernel_name, cwd=tmp_path) as (km, kc):
        run_ok(kc, setup_cell(ready_dir))
        run_ok(kc, launch_cell("start_distributed_train", table, str(tmp_path / "log"), job_env))
        procs = wait_until_ready(str(ready_dir))
        check_job_running(procs, marker)
        old_kernel = kernel_pid(km)

        km.restart_kernel(now=now)
        assert kernel_pid(km) != old_kernel and not alive(old_kernel)
        wait_until_gone(marker, procs["supervisor"], within=5.0)

        # The new kernel knows nothing of the job and can use the devices.
        kc.wait_for_ready(timeout=60)
        cell = run_ok(kc, IMPORTS + "\nprint('job' in globals())\nrc = start_and_wait_distributed_train("
                      "[sys.executable, '-c', 'print(1)'], rank_table=%r, log_dir='log-after', env=%r)\n"
                      "print('rc', rc)" % (table, job_env))
        assert cell.text().startswith("False\n") and cell.text().endswith("rc 0\n"), cell.text()
