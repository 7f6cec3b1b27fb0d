"""The `davincirun` command as a user runs it from a shell."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import MARKER_VARIABLE, REPO

DAVINCIRUN = shutil.which("davincirun")
pytestmark = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")


def run_cli(args, job_env, cwd, timeout=60):
    marker = ["--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])]
    return subprocess.run(
        [DAVINCIRUN] + marker + list(args), cwd=str(cwd), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, text=True,
    )


def test_help_and_version():
    out = subprocess.run([DAVINCIRUN, "--help"], stdout=subprocess.PIPE, text=True, check=True).stdout
    assert out.startswith("Usage: davincirun")
    assert "--grace-period" in out and "Exit status" in out
    version = subprocess.run([DAVINCIRUN, "--version"], stdout=subprocess.PIPE, text=True, check=True).stdout
    import davincirunsdk

    assert version.strip() == "davincirun " + davincirunsdk.__version__


def test_success_prints_prefixed_lines(tmp_path, rank_table, job_env):
    proc = run_cli(["-r", rank_table(3), sys.executable, "-c", "import os; print('rank says', os.environ['RANK_ID'])"],
                   job_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    for rank in range(3):
        assert "[rank %d] rank says %d\n" % (rank, rank) in proc.stdout
    assert "all 3 rank(s) exited 0" in proc.stderr
    assert len([n for n in os.listdir(tmp_path / "log" / "latest") if n.endswith(".log")]) == 3


def test_exit_code_of_first_failed_rank(tmp_path, rank_table, job_env):
    code = "import os, sys, time\nif os.environ['RANK_ID'] == '2': sys.exit(7)\ntime.sleep(120)\n"
    start = time.monotonic()
    proc = run_cli(["-r", rank_table(4), sys.executable, "-c", code], job_env, tmp_path)
    assert proc.returncode == 7
    assert time.monotonic() - start < 30
    assert "rank 2" in proc.stderr and "exit code 7" in proc.stderr
    assert "stopped by the launcher (SIGTERM)" in proc.stderr


def test_exit_code_for_a_signal_is_128_plus_n(tmp_path, rank_table, job_env):
    code = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"
    proc = run_cli(["-r", rank_table(2), sys.executable, "-c", code], job_env, tmp_path)
    assert proc.returncode == 128 + signal.SIGSEGV
    assert "SIGSEGV" in proc.stderr


def test_arguments_pass_through_untouched(tmp_path, rank_table, job_env):
    tricky = ["a b", "$(echo no)", "'q'", ";", "", "line\nbreak"]
    code = "import sys; print(repr(sys.argv[1:]))"
    proc = run_cli(["-r", rank_table(1), "--", sys.executable, "-c", code] + tricky, job_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[rank 0] %r" % (tricky,) in proc.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "no command given"),
        (["--no-such-option", "true"], "unknown option '--no-such-option' (see davincirun --help)"),
        (["--restart_delay", "1", "true"], "unknown option '--restart_delay'; did you mean --restart-delay?"),
        (["--grace-periods=3", "true"], "unknown option '--grace-periods=3'; did you mean --grace-period?"),
        (["--grace-period", "soon", "true"], "--grace-period"),
        (["--grace-period", "1e20", "true"], "--grace-period must be a number of seconds between 0 and 86400"),
        (["--grace-period", "0x10", "true"], "--grace-period expects a number of seconds, got '0x10'"),
        (["--job-timeout", " 5", "true"], "--job-timeout expects a number of seconds"),
        (["--drain-timeout", "1e9", "true"], "--drain-timeout must be a number of seconds between 0 and 86400"),
        (["--ranks-to-show", "9", "true"], "--ranks-to-show: rank 9 does not exist (the world size is 1)"),
        (["--", ""], "no command given: name the program each rank runs, e.g. python train.py"),
        (["--server-id", "elsewhere", "true"], "server id 'elsewhere' is not in the rank table"),
        (["--env", "NOEQUALS", "true"], "NAME=VALUE"),
    ],
)
def test_usage_errors_exit_2(tmp_path, rank_table, job_env, args, message):
    proc = run_cli(["-r", rank_table(1)] + args, job_env, tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_drain_timeout_flag_reaches_the_job(tmp_path, rank_table, job_env):
    proc = run_cli(["-r", rank_table(1), "--drain-timeout=0.5", "true"], job_env, tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_invalid_rank_table_exits_2_naming_the_value(tmp_path, job_env):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "1.0", "server_list": [{"server_id": "a", "device": '
                   '[{"device_id": "-1", "rank_id": "0"}]}]}')
    proc = run_cli(["-r", str(bad), "true"], job_env, tmp_path)
    assert proc.returncode == 2
    assert "/server_list/0/device/0/device_id" in proc.stderr and '"-1"' in proc.stderr


def test_command_not_found_exits_127(tmp_path, rank_table, job_env):
    proc = run_cli(["-r", rank_table(2), "davincirun-no-such-program-xyz"], job_env, tmp_path)
    assert proc.returncode == 127
    assert "command not found" in proc.stderr


def signal_cli(args, job_env, cwd, sig, after, preexec_fn=None):
    """Runs davincirun, sends it `sig` after `after` seconds, returns (returncode, stderr)."""
    marker = ["--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])]
    proc = subprocess.Popen(
        [DAVINCIRUN] + marker + list(args), cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn,
    )
    try:
        time.sleep(after)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT], ids=lambda s: s.name)
def test_stop_signals_stop_the_job(tmp_path, rank_table, job_env, sig):
    code, err = signal_cli(["-r", rank_table(3), sys.executable, "-c", "import time; time.sleep(120)"],
                           job_env, tmp_path, sig, 1.0)
    assert code == 128 + sig
    assert "stopped" in err


def test_a_second_ctrl_c_kills_at_once(tmp_path, rank_table, job_env):
    """Ranks ignoring SIGTERM with a 60 s grace period: the first SIGINT asks
    them to stop, the second kills them without waiting out the grace."""
    code = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\ntime.sleep(120)\n")
    marker = ["--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])]
    proc = subprocess.Popen([DAVINCIRUN] + marker + ["--grace-period", "60", "-r", rank_table(2), sys.executable,
                             "-c", code], cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until_every_log_says(tmp_path, 2, "ready")
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert proc.poll() is None  # still inside the grace period
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)  # far less than the 60 s grace
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    summary = json.loads((tmp_path / "log" / "latest" / "summary.json").read_text())
    assert all(r["killed_by_launcher"] for r in summary["ranks"]), summary


def test_a_closed_output_pipe_never_stops_the_job(tmp_path, rank_table, job_env):
    """`davincirun ... | head -1`: once the reader is gone, the launcher's
    output fails with EPIPE, not SIGPIPE; the ranks run to their end and the
    log files are complete."""
    code = ("import os, sys, time\nfor i in range(2000):\n    print('line', i, flush=True)\n"
            "    if i == 0: time.sleep(0.5)\n")
    marker = ["--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])]
    proc = subprocess.Popen([DAVINCIRUN] + marker + ["-r", rank_table(2), sys.executable, "-c", code],
                            cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        proc.stdout.readline()  # the first line, as `head -1` reads it
        proc.stdout.close()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    for log in (tmp_path / "log" / "latest").glob("rank_*.log"):
        assert log.read_text().splitlines() == ["line %d" % i for i in range(2000)]


def test_signals_ignored_at_start_stay_ignored(tmp_path, rank_table, job_env):
    """`nohup davincirun ...`: a hangup must not stop the job."""
    code, err = signal_cli(["-r", rank_table(2), sys.executable, "-c", "import time; time.sleep(2)"],
                           job_env, tmp_path, signal.SIGHUP, 0.8,
                           preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    assert code == 0, err


def test_short_option_with_equals_is_refused(tmp_path, rank_table, job_env):
    proc = run_cli(["-r=" + rank_table(1), "true"], job_env, tmp_path)
    assert proc.returncode == 2
    assert "unknown option '-r=" in proc.stderr


def test_launcher_notices_go_to_stderr(tmp_path, rank_table, job_env):
    code = "import os, sys, time\nif os.environ['RANK_ID'] == '1': sys.exit(4)\ntime.sleep(120)\n"
    proc = run_cli(["-r", rank_table(2), sys.executable, "-c", code], job_env, tmp_path)
    assert proc.returncode == 4
    assert "[davincirun] rank 1" in proc.stderr
    assert "[davincirun]" not in proc.stdout


def test_incomplete_log_is_reported(tmp_path, rank_table, job_env):
    """A log file that cannot take every byte (here: a 64 KiB file-size limit
    standing in for a full disk) is reported; the ranks are not disturbed."""
    import resource

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))

    marker = ["--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])]
    proc = subprocess.run(
        [DAVINCIRUN] + marker + ["-r", rank_table(1), sys.executable, "-c", "print('x' * 200000)"],
        cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, timeout=60, preexec_fn=limit_file_size,
    )
    assert proc.returncode == 0
    assert "log of rank 0 is incomplete" in proc.stderr and "File too large at byte 65536" in proc.stderr


def test_dry_run_prints_the_plan_and_starts_nothing(tmp_path, rank_table, job_env):
    proc = run_cli(["--dry-run", "-r", rank_table(2), "--env", "EXTRA=1", "definitely-not-run", "a b"], job_env,
                   tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "command: definitely-not-run 'a b'\n" in proc.stdout
    assert "rank 1 (local rank 1): physical device 1, logical device 1" in proc.stdout
    assert "  + RANK_ID=1\n" in proc.stdout and "  + EXTRA=1\n" in proc.stdout
    assert not (tmp_path / "log").exists()


@pytest.mark.parametrize("timeout", ["0.5", "0.0004"])  # a tiny timeout is one, never "no limit"
def test_job_timeout_exits_124(tmp_path, rank_table, job_env, timeout):
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    proc = run_cli(["--job-timeout", timeout, "-r", rank_table(2)] + sleeper, job_env, tmp_path)
    assert proc.returncode == 124
    assert "job timeout" in proc.stderr


def test_quiet_prints_only_problems(tmp_path, rank_table, job_env):
    proc = run_cli(["-q", "-r", rank_table(1), "true"], job_env, tmp_path)
    assert proc.returncode == 0 and proc.stderr == ""


def test_this_machine_is_found_in_a_multi_server_table(tmp_path, job_env):
    """Only a dry run: the corpus' addresses are made up and never contacted."""
    table = os.path.join(REPO, "tests", "data", "rank_tables", "valid", "v1_two_servers_16p.json")
    env = dict(os.environ, MA_CURRENT_HOST_IP="10.0.0.12")
    proc = subprocess.run([DAVINCIRUN, "--dry-run", "-r", table, "true"], cwd=str(tmp_path), env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "server 10.0.0.12 of 2, ranks 8..15 of world size 16" in proc.stdout
    assert "MA_CURRENT_HOST_IP" in proc.stdout  # the reason names the rule that matched
    env.pop("MA_CURRENT_HOST_IP")
    proc = subprocess.run([DAVINCIRUN, "--dry-run", "-r", table, "true"], cwd=str(tmp_path), env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert "cannot tell which of the 2 servers" in proc.stderr and "--server-id" in proc.stderr


def wait_until_every_log_says(cwd, ranks, text, timeout=30):
    """Waits until each of the `ranks` log files of the latest run holds `text`."""
    deadline = time.monotonic() + timeout
    latest = cwd / "log" / "latest"
    while time.monotonic() < deadline:
        logs = list(latest.glob("rank_*.log")) if latest.exists() else []
        if len(logs) == ranks and all(text in p.read_text() for p in logs):
            return
        time.sleep(0.05)
    raise AssertionError("the ranks never all wrote %r" % text)


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGUSR2], ids=lambda s: s.name)
def test_user_signals_are_forwarded_to_every_rank(tmp_path, rank_table, job_env, sig):
    code = (
        "import signal, sys, time\n"
        "got = []\n"
        "signal.signal(signal.%s, lambda *a: got.append(1))\n"
        "print('ready', flush=True)\n"
        "deadline = time.time() + 60\n"
        "while not got and time.time() < deadline:\n"
        "    time.sleep(0.02)\n"
        "print('got', signal.%s.name if got else 'no signal', flush=True)\n"
        "sys.exit(0 if got else 1)\n"
    ) % (sig.name, sig.name)
    marker = ["--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])]
    proc = subprocess.Popen([DAVINCIRUN] + marker + ["-r", rank_table(3), sys.executable, "-c", code],
                            cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until_every_log_says(tmp_path, 3, "ready")  # every rank has its handler
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out.count("got %s" % sig.name) == 3


def wait_for_marked(marker, count, timeout=30):
    from conftest import processes_with_marker

    deadline = time.monotonic() + timeout
    found = processes_with_marker(marker)
    while len(found) != count and time.monotonic() < deadline:
        time.sleep(0.05)
        found = processes_with_marker(marker)
    return found


def test_ranks_die_with_a_sigkilled_launcher(tmp_path, rank_table, job_env):
    marker = job_env[MARKER_VARIABLE]
    proc = subprocess.Popen(
        [DAVINCIRUN, "--env", "%s=%s" % (MARKER_VARIABLE, marker), "-r", rank_table(3), sys.executable, "-c",
         "import time; time.sleep(120)"],
        cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        assert len(wait_for_marked(marker, 3)) == 3
    finally:
        proc.kill()  # SIGKILL: the launcher gets no chance to clean up
        proc.wait()
    assert wait_for_marked(marker, 0, timeout=10) == []


def test_console_redirected_to_a_file_gets_every_line_of_a_flood(tmp_path, rank_table, job_env):
    """`davincirun ... > out.txt`: a file never stops reading, so no line is
    skipped from it even when every rank floods at once (a terminal or pipe
    would get a bounded queue that skips instead)."""
    lines = 200000
    flood = (
        "import os, sys\nr = os.environ['RANK_ID']\n"
        "sys.stdout.write(''.join('rank %%s line %%d\\n' %% (r, i) for i in range(%d)))" % lines
    )
    marker = ["--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])]
    out_path = tmp_path / "out.txt"
    with open(out_path, "wb") as out:
        proc = subprocess.run([DAVINCIRUN] + marker + ["-r", rank_table(4), sys.executable, "-c", flood],
                              cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE,
                              timeout=120, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "skipped" not in proc.stderr
    counts = [0] * 4
    with open(out_path, "rb") as f:
        for line in f:
            prefix, _, rest = line.partition(b"] ")
            rank = int(prefix[len(b"[rank "):])
            assert rest.startswith(b"rank %d line " % rank)
            counts[rank] += 1
    assert counts == [lines] * 4


def test_ranks_to_show(tmp_path, rank_table, job_env):
    code = "import os; print('hello from', os.environ['RANK_ID'])"
    proc = run_cli(["--ranks-to-show", "0,2", "-r", rank_table(3), sys.executable, "-c", code], job_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[rank 0] hello from 0" in proc.stdout and "[rank 2] hello from 2" in proc.stdout
    assert "[rank 1]" not in proc.stdout
    with open(tmp_path / "log" / "latest" / "rank_1.device_1.log") as f:
        assert f.read() == "hello from 1\n"


@pytest.mark.parametrize("value, message", [("0,,1", "expects rank ids"), ("a", "expects rank ids"),
                                            ("7", "rank 7 does not exist")])
def test_ranks_to_show_bad_values_exit_2(tmp_path, rank_table, job_env, value, message):
    proc = run_cli(["--ranks-to-show", value, "-r", rank_table(2), "true"], job_env, tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_quiet_and_verbose_together_exit_2(tmp_path, rank_table, job_env):
    proc = run_cli(["-q", "-v", "-r", rank_table(1), "true"], job_env, tmp_path)
    assert proc.returncode == 2
    assert "contradict" in proc.stderr


def test_a_directory_as_the_command_says_so(tmp_path, rank_table, job_env):
    (tmp_path / "adir").mkdir()
    proc = run_cli(["-r", rank_table(1), "./adir"], job_env, tmp_path)
    assert proc.returncode == 126
    assert "'./adir': it is a directory" in proc.stderr


@pytest.mark.parametrize("server0, expected", [
    ({"host_ip": "10.9.0.1", "container_ip": "172.16.0.1"}, "10.9.0.1"),
    ({"container_ip": "172.16.0.1"}, "172.16.0.1"),
    ({}, "10.0.0.11"),
], ids=["host_ip", "container_ip", "server_id"])
def test_a_multi_server_job_meets_at_rank_0s_server(tmp_path, job_env, server0, expected):
    """MASTER_ADDR on a job spanning servers: the host_ip of the server holding
    rank 0, else its container_ip, else its server_id; JOB_ID and MASTER_PORT
    derived from the table, the same on every server without talking, unless
    set. A dry run on each server's behalf: the addresses are made up and
    never contacted."""
    servers = []
    for s, server_id in enumerate(["10.0.0.11", "10.0.0.12"]):
        devices = [{"device_id": str(d), "device_ip": "192.%d.%d.1" % (d + 1, s), "rank_id": str(2 * s + d)}
                   for d in range(2)]
        servers.append(dict({"server_id": server_id, "device": devices}, **(server0 if s == 0 else {})))
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"version": "1.0", "server_count": "2", "server_list": servers, "status": "completed"}))
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "JOB_ID", "BATCH_JOB_ID", "MA_VJ_NAME")}
    seen = []
    for server_id in ("10.0.0.11", "10.0.0.12"):
        proc = subprocess.run([DAVINCIRUN, "--dry-run", "--server-id", server_id, "-r", str(table), "true"],
                              cwd=str(tmp_path), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count("  + MASTER_ADDR=%s\n" % expected) == 2
        ports = set(re.findall(r"\+ MASTER_PORT=(\d+)\n", proc.stdout))
        job_ids = set(re.findall(r"\+ JOB_ID=(\S+)\n", proc.stdout))
        assert len(ports) == 1 and len(job_ids) == 1, proc.stdout
        seen.append((ports.pop(), job_ids.pop()))
    assert seen[0] == seen[1]
    assert 20000 <= int(seen[0][0]) <= 31999
