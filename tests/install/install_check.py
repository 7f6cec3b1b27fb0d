"""Run inside a root file system by scripts/test_install.sh, as a non-root
user, with the installed davincirunsdk wheel: the `davincirun` found in PATH
is the compiled program in the scripts directory pip installed it to (a
venv's bin, or ~/.local/bin with --user), with its supervisor beside it, and
runs a script without execute permission with this installation's Python;
real 2-rank jobs through that command and the Python API on a rank table
describing this "machine" (one server, 2 devices), a failing rank among them
(fail-fast, the failed rank named, complete logs, the daemons the ranks
detached killed), every error type raised, and what the kernel (or
qemu-user) refuses, with the fallback the job took. Prints one line per
check; exits non-zero on the first failure. Python 3.7 syntax: it runs on
the root file system's python3.

    python install_check.py WORK_DIR           a venv's python, the venv's bin first in PATH
    python install_check.py WORK_DIR --user    after pip install --user, ~/.local/bin in PATH
"""

import ctypes
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import sysconfig
import time

WORK = os.path.abspath(sys.argv[1])
USER_SCHEME = sys.argv[2:] == ["--user"]
LINES = 500  # lines each rank writes
# Where pip put the command, by the scheme it installed with.
SCRIPTS = sysconfig.get_path("scripts", "posix_user") if USER_SCHEME else sysconfig.get_path("scripts")
DAVINCIRUN = shutil.which("davincirun")
SUBREAPER_NOTICE = "PR_SET_CHILD_SUBREAPER was refused with"

# argv: SCENARIO STATE_DIR. Each rank detaches a daemon (double fork and
# setsid()) that records its pid, writes LINES numbered lines, then: ok ->
# exits 0; fail -> rank 1 exits 3 once rank 0 is ready, rank 0 sleeps until
# stopped; sleep -> sleeps until stopped.
RANK = r"""
import os, sys, time
scenario, state = sys.argv[1], sys.argv[2]
rank = os.environ["RANK_ID"]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        fd = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(fd, target)
        with open(os.path.join(state, "daemon.%s.tmp" % rank), "w") as f:
            f.write(str(os.getpid()))
        os.rename(os.path.join(state, "daemon.%s.tmp" % rank), os.path.join(state, "daemon." + rank))
        time.sleep(600)
    os._exit(0)
while not os.path.exists(os.path.join(state, "daemon." + rank)):
    time.sleep(0.01)
for i in range(int(os.environ["CHECK_LINES"])):
    print("rank %s line %d" % (rank, i))
sys.stdout.flush()
open(os.path.join(state, "ready." + rank), "w").close()
if scenario == "ok":
    sys.exit(0)
if scenario == "fail" and rank == "1":
    while not os.path.exists(os.path.join(state, "ready.0")):
        time.sleep(0.01)
    sys.exit(3)
time.sleep(600)
"""

# Run in a child: clone(CLONE_PIDFD) and PR_SET_CHILD_SUBREAPER, then exit
# with a JSON line saying what happened. Syscall numbers from the kernel's
# tables (clone: 56 on x86_64, 220 on aarch64; pidfd_open: 434 on both).
PROBE = r"""
import ctypes, errno, json, os, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def answer(rc):
    return "works" if rc >= 0 else "refused: " + errno.errorcode.get(ctypes.get_errno(), "?")
out = {}
fd = libc.syscall(434, os.getpid(), 0)
out["pidfd_open"] = answer(fd)
if fd >= 0:
    os.close(fd)
nr = {"x86_64": 56, "aarch64": 220}[platform.machine()]
pidfd = ctypes.c_int(-1)
pid = libc.syscall(nr, ctypes.c_ulong(0x1000 | 17), None, ctypes.byref(pidfd), None, None)  # CLONE_PIDFD|SIGCHLD
if pid == 0:
    os._exit(0)
out["clone(CLONE_PIDFD)"] = answer(pid)
if pid > 0:
    os.waitpid(pid, 0)
    os.close(pidfd.value)
out["prctl(PR_SET_CHILD_SUBREAPER)"] = answer(libc.prctl(36, 1, 0, 0, 0))
print(json.dumps(out))
"""


def say(text):
    print("install-check: " + text, flush=True)


def check(condition, what, detail=""):
    if not condition:
        say("FAILED: %s%s" % (what, ("\n" + detail) if detail else ""))
        sys.exit(1)
    say("ok: " + what)


def write_table(path):
    table = {"version": "1.0", "server_count": "1", "status": "completed",
             "server_list": [{"server_id": "127.0.0.1",
                              "device": [{"device_id": "0", "rank_id": "0"}, {"device_id": "1", "rank_id": "1"}]}]}
    with open(path, "w") as f:
        json.dump(table, f)
    return path


class Job:
    """One job's directories and command."""

    count = 0

    def __init__(self, scenario):
        Job.count += 1
        self.dir = os.path.join(WORK, "job%d-%s" % (Job.count, scenario))
        self.state = os.path.join(self.dir, "state")
        self.log_dir = os.path.join(self.dir, "log")
        os.makedirs(self.state)
        script = os.path.join(self.dir, "rank.py")
        with open(script, "w") as f:
            f.write(RANK)
        self.command = [sys.executable, script, scenario, self.state]

    def summary(self):
        with open(os.path.join(self.log_dir, "latest", "summary.json")) as f:
            return json.load(f)

    def daemons(self):
        return [int(open(os.path.join(self.state, "daemon.%d" % r)).read()) for r in range(2)]


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def check_logs(paths, what):
    for rank, path in enumerate(paths):
        with open(path) as f:
            text = f.read()
        want = "".join("rank %d line %d\n" % (rank, i) for i in range(LINES))
        check(text == want, "%s: rank %d's log holds every line it wrote (%d lines)" % (what, rank, LINES),
              "got %d bytes, want %d" % (len(text), len(want)))


def check_gone(pids, what):
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if alive(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    check(not left, "%s: nothing of the job survives (daemons %s)" % (what, pids), "alive: %s" % left)


def check_fallbacks(summary, refused, output, what):
    """The job took the path this kernel allows, and said so where it should."""
    if refused["clone(CLONE_PIDFD)"] != "works":
        reason = summary["process_tracking_fallback"] or ""
        check(summary["process_tracking"] == "sigchld" and "CLONE_PIDFD" in reason,
              "%s: clone(CLONE_PIDFD) refused -> SIGCHLD tracking, recorded: %s" % (what, reason))
    else:
        check(summary["process_tracking"] == "pidfd" and summary.get("process_tracking_fallback") is None,
              "%s: pidfd tracking, no fallback" % what)
    if refused["prctl(PR_SET_CHILD_SUBREAPER)"] != "works":
        check(summary["child_subreaper"] is False and output.count(SUBREAPER_NOTICE) == 1,
              "%s: subreaper refused -> child_subreaper false, one notice" % what, output[-3000:])
    else:
        check(summary.get("child_subreaper", True) is True and SUBREAPER_NOTICE not in output,
              "%s: a child subreaper, no notice" % what)


# A script without execute permission: `davincirun which.py` runs it with
# an interpreter of its own choosing.
WHICH = "import os, sys\nprint('interpreter', sys.prefix, '%d.%d' % sys.version_info[:2], os.environ['RANK_ID'])\n"


def command_checks(table):
    """The command in PATH is the program, where this scheme puts scripts."""
    expected = os.path.join(SCRIPTS, "davincirun")
    check(DAVINCIRUN is not None and os.path.realpath(DAVINCIRUN) == os.path.realpath(expected),
          "the davincirun in PATH is %s" % expected, "found %s" % DAVINCIRUN)
    with open(DAVINCIRUN, "rb") as f:
        check(f.read(4) == b"\x7fELF", "%s is an ELF program, not a script" % DAVINCIRUN)
    supervisor = os.path.join(SCRIPTS, "davincirun-supervisor")
    check(os.access(DAVINCIRUN, os.X_OK) and os.access(supervisor, os.X_OK),
          "it and davincirun-supervisor beside it are executable")
    work = os.path.join(WORK, "which")
    os.makedirs(work)
    with open(os.path.join(work, "which.py"), "w") as f:
        f.write(WHICH)
    proc = subprocess.run([DAVINCIRUN, "-r", table, "-l", os.path.join(work, "log"), "which.py"], cwd=work,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300)
    check(proc.returncode == 0, "davincirun which.py (no execute permission) runs", proc.stderr[-3000:])
    # A venv's own pythonX.Y beside the command; ~/.local/bin has none:
    # pythonX.Y from PATH, the interpreter pip install --user ran under.
    version = "python%d.%d" % sys.version_info[:2]
    python = shutil.which(version) if USER_SCHEME else os.path.join(SCRIPTS, version)
    check("running it with %s\n" % python in proc.stderr, "which.py runs with %s" % python, proc.stderr[-3000:])
    for rank in range(2):
        line = "[rank %d] interpreter %s %d.%d %d" % ((rank, sys.prefix) + sys.version_info[:2] + (rank,))
        check(line in proc.stdout, "rank %d: that interpreter is this installation's (%s)" % (rank, sys.prefix),
              proc.stdout[-3000:])


def run_cli(job, table):
    proc = subprocess.run([DAVINCIRUN, "-r", table, "-l", job.log_dir, "--grace-period", "10", "--"] + job.command,
                          cwd=job.dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def cli_jobs(table, refused):
    job = Job("ok")
    code, out, err = run_cli(job, table)
    check(code == 0, "CLI: a 2-rank job succeeds (exit 0)", err[-3000:])
    summary = job.summary()
    check_logs([r["log"] for r in summary["ranks"]], "CLI success")
    check("[rank 1] rank 1 line %d\n" % (LINES - 1) in out, "CLI success: the ranks' lines reach the console")
    check(summary["leftover_processes_killed"] == 2, "CLI success: the 2 detached daemons were killed")
    check_gone(job.daemons(), "CLI success")
    check_fallbacks(summary, refused, err, "CLI success")

    job = Job("fail")
    start = time.monotonic()
    code, out, err = run_cli(job, table)
    elapsed = time.monotonic() - start
    check(code == 3, "CLI: rank 1 exits 3 -> davincirun exits 3", err[-3000:])
    check("rank 1 (pid" in err and "failed with exit code 3" in err, "CLI: the failure names rank 1 and its code")
    summary = job.summary()
    stopped, failed = summary["ranks"]
    check(summary["first_failure"] == 1 and stopped["terminated_by_launcher"] and stopped["signal"] == 15
          and not stopped["killed_by_launcher"],
          "CLI fail-fast: rank 0 stopped by SIGTERM, no SIGKILL needed (%.1f s, grace period 10 s)" % elapsed)
    check_logs([r["log"] for r in summary["ranks"]], "CLI failure")
    check_gone(job.daemons() + [r["pid"] for r in summary["ranks"]], "CLI failure")
    check_fallbacks(summary, refused, err, "CLI failure")
    say("summary.json: process_tracking=%s, process_tracking_fallback=%s, child_subreaper=%s, "
        "leftover_processes_killed=%d" % (summary["process_tracking"], summary.get("process_tracking_fallback"),
                                          summary.get("child_subreaper"), summary["leftover_processes_killed"]))


def api_jobs(table, refused):
    from davincirunsdk import DistributedRuntimeError, start_and_wait_distributed_train

    os.environ["CHECK_LINES"] = str(LINES)
    job = Job("ok")
    code = start_and_wait_distributed_train(job.command, work_dir=job.dir, log_dir=job.log_dir, rank_table=table,
                                            output_notebook=False)
    check(code == 0, "API: a 2-rank job succeeds (returns 0)")
    check_logs([r["log"] for r in job.summary()["ranks"]], "API success")
    check_gone(job.daemons(), "API success")

    job = Job("fail")
    try:
        start_and_wait_distributed_train(job.command, work_dir=job.dir, log_dir=job.log_dir, rank_table=table,
                                         output_notebook=False, grace_period=10)
        check(False, "API: the failing job raises DistributedRuntimeError")
    except DistributedRuntimeError as e:
        result = e.result
        check((e.rank, e.exit_code) == (1, 3) and "rank 1" in str(e),
              "API: DistributedRuntimeError names rank 1 and exit code 3")
        check(result.ranks[0].terminated_by_launcher and result.ranks[0].status == "signal 15 (SIGTERM)",
              "API fail-fast: rank 0 stopped by SIGTERM")
        fallback = getattr(result, "tracking_fallback", None)
        subreaper = getattr(result, "child_subreaper", True)
        check((result.tracking == "sigchld") == (refused["clone(CLONE_PIDFD)"] != "works") == (fallback is not None)
              and subreaper == (refused["prctl(PR_SET_CHILD_SUBREAPER)"] == "works"),
              "API: JobResult.tracking=%s, tracking_fallback=%s, child_subreaper=%s" % (
                  result.tracking, fallback, subreaper))
        check_logs([r.log_path for r in result.ranks], "API failure")
        check_gone(job.daemons() + [r.pid for r in result.ranks], "API failure")


def error_types(table):
    """Every error type, each raised by a real call; the C++ ones cross the
    pybind11 boundary from davincirunsdk._core."""
    import davincirunsdk
    from davincirunsdk import _core, errors, start_distributed_train

    names = ["DavincirunError", "RankTableError", "LaunchConfigError", "OptionTypeError", "DeviceBusyError",
             "SpawnError", "LauncherSystemError", "DistributedRuntimeError"]
    check(all(getattr(davincirunsdk, n) is getattr(errors, n) for n in names), "every error type imports")

    seen = []

    def raised(call):
        try:
            call()
        except Exception as e:  # noqa: BLE001 (the type raised is what is checked)
            seen.append(e)
            return e
        return None

    e = raised(lambda: davincirunsdk.parse_rank_table('{"version": "1.0", "server_list": 3}'))
    check(isinstance(e, errors.RankTableError) and e.pointer == "/server_list", "RankTableError from _core: %s" % e)
    e = raised(lambda: start_distributed_train(["true"], rank_table=table, grace_period=-1, output_notebook=False))
    check(isinstance(e, errors.LaunchConfigError) and e.option == "grace_period",
          "LaunchConfigError from _core: %s" % e)
    e = raised(lambda: start_distributed_train(["true"], rank_table=table, grace_period="10", output_notebook=False))
    check(isinstance(e, errors.OptionTypeError) and isinstance(e, TypeError), "OptionTypeError: %s" % e)
    e = raised(lambda: start_distributed_train([WORK], rank_table=table, output_notebook=False))
    check(isinstance(e, errors.SpawnError) and e.exit_code == 126, "SpawnError from _core: %s" % e)
    first = start_distributed_train([sys.executable, "-c", "import time; time.sleep(60)"], rank_table=table,
                                    log_dir=os.path.join(WORK, "busy"), output_notebook=False, grace_period=10)
    try:
        e = raised(lambda: start_distributed_train(["true"], rank_table=table, output_notebook=False))
        check(isinstance(e, errors.DeviceBusyError) and e.devices == [0, 1], "DeviceBusyError from _core: %s" % e)
    finally:
        first.terminate()
        first.wait(raise_exception=False)
    # No descriptor left for the lifeline's socket pair: EMFILE in the core.
    options = _core.LaunchOptions()
    options.command = ["true"]
    options.rank_table = table
    options.log_dir = os.path.join(WORK, "emfile")
    options.supervisor_program = os.path.join(os.path.dirname(davincirunsdk.__file__), "bin", "davincirun-supervisor")
    plan = _core.plan_launch(options)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    probe = os.open(os.devnull, os.O_RDONLY)
    os.close(probe)
    resource.setrlimit(resource.RLIMIT_NOFILE, (probe, hard))
    try:
        e = raised(lambda: _core.Job(plan, "none"))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    check(isinstance(e, errors.LauncherSystemError) and isinstance(e, OSError),
          "LauncherSystemError from _core: %s" % e)
    e = raised(lambda: davincirunsdk.start_and_wait_distributed_train([sys.executable, "-c", "raise SystemExit(4)"],
                                                                      rank_table=table, output_notebook=False))
    check(isinstance(e, errors.DistributedRuntimeError) and e.exit_code == 4, "DistributedRuntimeError: %s" % e)
    check(len(seen) == 7 and all(isinstance(x, errors.DavincirunError) for x in seen),
          "each of the 7 raised errors is a DavincirunError")


def main():
    os.makedirs(WORK, exist_ok=True)
    os.environ["CHECK_LINES"] = str(LINES)
    import davincirunsdk

    say("python %s on %s, glibc %s, uid %d, davincirunsdk %s (%s)" % (
        platform.python_version(), platform.machine(), platform.libc_ver()[1], os.getuid(), davincirunsdk.__version__,
        "pip install --user" if USER_SCHEME else "a venv"))
    check(os.getuid() != 0, "running as a non-root user")
    probe = subprocess.run([sys.executable, "-c", PROBE], stdout=subprocess.PIPE, universal_newlines=True, check=True)
    refused = json.loads(probe.stdout)
    say("kernel features as this process sees them: " + ", ".join("%s %s" % kv for kv in refused.items()))
    table = write_table(os.path.join(WORK, "rank_table.json"))
    command_checks(table)
    cli_jobs(table, refused)
    api_jobs(table, refused)
    error_types(table)
    say("all checks passed")


if __name__ == "__main__":
    ctypes.CDLL(None)  # fail early if ctypes cannot load the C library
    main()
