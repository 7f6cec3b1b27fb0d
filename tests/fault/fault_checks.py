"""The checks of one rep (fault_rep.py), each failure recorded in its
RepResult: nothing of the job left on any server and no device lock held
once the callers ended; then per server, its caller's exit and outcome,
summary.json, the report and the journal against what fault_expect.py
says, and every rank's log against the stream it wrote.
"""

import json
import os
import re
import signal
import subprocess
import time

from fault_expect import allowed_statuses, daemons_counted
from fault_stream import verify_logs
from process_scan import MARKER_VARIABLE, processes_with_marker

SURVIVOR_WAIT = 5.0  # seconds after the callers ended (covers a grace period and the sweep)

# ---- report parsing ---------------------------------------------------------

_FIRST = re.compile(r"^rank (\d+) \(pid (\d+)\) failed with (.+) after [\d.]+ s$")
_ONE = re.compile(r"^rank (\d+) \(pid (\d+)\): (.+)$")
_GROUP = re.compile(r"^(\d+) ranks \(([\d, -]+)\): (.+)$")


def parse_report(text):
    """(first failed rank or None, {rank: outcome} of the other ranks listed)."""
    first, others = None, {}
    for line in text.splitlines():
        line = line[len("distributed training failed: "):] if line.startswith("distributed training failed: ") else line
        m = _FIRST.match(line)
        if m:
            first = int(m.group(1))
            continue
        m = _ONE.match(line)
        if m:
            others[int(m.group(1))] = m.group(3)
            continue
        m = _GROUP.match(line)
        if m:
            listed = []
            for part in m.group(2).split(", "):
                lo, _, hi = part.partition("-")
                listed.extend(range(int(lo), int(hi or lo) + 1))
            if len(listed) != int(m.group(1)):
                others[-1] = "group count %s does not match %s" % (m.group(1), m.group(2))
            for r in listed:
                others[r] = m.group(3)
    return first, others


def read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


# ---- what is left once the callers ended --------------------------------------

def check_processes(result, marker, runs):
    """No process of the rep is left on any server (SURVIVOR_WAIT for them
    to go), and no device of any server is locked: a new job could start."""
    deadline = time.monotonic() + SURVIVOR_WAIT
    left = processes_with_marker(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = processes_with_marker(marker)
    for run in runs:  # before the survivors go: one of them may be what holds a lock
        check_locks(result, run)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if left:
        result.survivors += len(left)
        result.fail("survivors", "%d process(es) alive %.0f s after the callers ended: %s" % (
            len(left), SURVIVOR_WAIT, _describe(left)))


def check_locks(result, run):
    """Whether a new job could take the server's devices now: davincirun
    --dry-run exits 2 when another job holds one of them."""
    env = dict(run.env, DAVINCIRUN_LOCK_DIR=run.lock_dir)
    for name in (MARKER_VARIABLE, "DAVINCIRUN_TEST_HOLD"):
        env.pop(name, None)
    dry = subprocess.run(["davincirun", "--dry-run", "-r", run.table, "--server-id", run.server.server_id,
                          "--wait-timeout", "0", "true"], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if dry.returncode == 2 and b"in use by another job" in dry.stderr:
        result.held_locks += 1
        result.fail("locks", "server %s: a device is still locked: %s" % (
            run.server.server_id, dry.stderr.decode(errors="replace").strip()[-300:]))
    elif dry.returncode != 0:
        result.fail("locks", "server %s: the dry run exited %d: %s" % (
            run.server.server_id, dry.returncode, dry.stderr.decode(errors="replace").strip()[-300:]))


def _describe(pids):
    out = []
    for pid in pids[:5]:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                out.append("%d %s" % (pid, f.read().replace(b"\0", b" ").decode(errors="replace")[:80]))
        except OSError:
            out.append(str(pid))
    return "; ".join(out)


# ---- one server ---------------------------------------------------------------

def check_server(result, run, chaos, written):
    """The caller, summary.json, report, journal and logs of one server."""
    plan, server, want = run.plan, run.server, run.expected
    where = "server %s: " % server.server_id if len(plan.servers) > 1 else ""

    def fail(check, detail):
        result.fail(check, where + detail)

    stderr = read_text(run.path["caller.err"])
    python = plan.caller == "python"
    code = run.proc.returncode
    want_code = -signal.SIGKILL if want.caller_killed else 0 if python else want.caller_code
    if code != want_code:
        fail("caller", "exit status %s, expected %s; stderr: %s" % (code, want_code, stderr.strip()[-600:]))
    if "Traceback" in stderr:
        fail("caller", "a Python traceback: %s" % stderr.strip()[-600:])
    for words in want.console:
        if words not in stderr:
            fail("caller", "standard error does not say %r: %s" % (words, stderr.strip()[-600:]))
    record = {}
    if python and not want.caller_killed:
        try:
            with open(run.path["caller.json"]) as f:
                record = json.load(f)
        except (OSError, ValueError) as e:
            fail("caller", "no result from the Python caller: %s" % e)
        got = (record.get("outcome"), record.get("exit_code"))
        if record and got != (want.outcome, want.caller_code):
            fail("caller", "Python outcome %s %s, expected %s %s" % (got + (want.outcome, want.caller_code)))
    run_dir = os.path.realpath(os.path.join(run.log_dir, "latest"))
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
    except (OSError, ValueError) as e:
        fail("summary", "no summary.json in %s: %s" % (run_dir, e))
        return
    if record.get("run_dir") and os.path.realpath(record["run_dir"]) != run_dir:
        fail("summary", "the caller's run_dir %s is not log/latest %s" % (record["run_dir"], run_dir))
    if sorted(e["rank"] for e in summary.get("ranks", [])) != list(server.ranks()):
        fail("summary", "ranks %s in summary.json, expected %d-%d" % (
            [e["rank"] for e in summary.get("ranks", [])][:10], server.first, server.first + server.count - 1))
        return
    _check_summary(plan, server, want, summary, fail)
    if want.reported:
        text = (record.get("message") or record.get("report") or "") if python else stderr
        _check_report(plan, server, want, record, text, fail)
    journal = read_text(os.path.join(run_dir, "events.txt"))
    at = 0
    for line in want.journal:
        found = journal.find(line, at)
        if found < 0:
            fail("report", "the journal has no %r after byte %d: %s" % (line, at, journal[-1500:]))
            break
        at = found + len(line)
    _check_logs(result, plan, server, summary, run_dir, chaos, written, fail)


def _status_code(entry):
    return entry["exit_code"] if entry["exit_code"] is not None else 128 + entry["signal"]


def _check_summary(plan, server, want, summary, fail):
    got = (summary["exit_code"], summary["stop_reason"], summary["stopped_in"], summary["first_failure"])
    expected = (want.job_code, want.reason, want.stopped_in, want.first_failure)
    if got != expected:
        fail("report", "summary.json: exit code, stop reason, stopped in, first failure %s, expected %s" % (
            got, expected))
    peer = (summary.get("peer_stop") or {}).get("server_id")
    if peer != want.peer_server:
        fail("report", "summary.json: peer_stop names server %s, expected %s" % (peer, want.peer_server))
    ranks = {e["rank"]: e for e in summary["ranks"]}
    first = summary["first_failure"]
    if want.first_failure is not None and first == want.first_failure:
        # The rank named first also ended first among the ranks that failed.
        ended = ranks[first]["ended"]
        for e in ranks.values():
            if e["rank"] != first and _status_code(e) != 0 and e["ended"] < ended:
                fail("report", "rank %d (%s) ended at %.6f, before the first failure rank %d at %.6f" % (
                    e["rank"], e["status"], e["ended"], first, ended))
    daemons = sum(1 for r in server.ranks() if plan.behaviours[r].daemon)
    if daemons_counted(plan) and summary["leftover_processes_killed"] != daemons:
        fail("summary", "leftover_processes_killed %s, expected %d (one daemon each)" % (
            summary["leftover_processes_killed"], daemons))
    for r, e in sorted(ranks.items()):
        b = plan.behaviours[r]
        got = (_status_code(e), e["terminated_by_launcher"])
        if got not in allowed_statuses(plan, server, r):
            fail("report", "rank %d (%s) ended with %s%s, not what its behaviour allows" % (
                r, b.kind, e["status"], " (stopped by the launcher)" if got[1] else ""))
        if (got[0] == 128 + signal.SIGKILL) != bool(e["killed_by_launcher"]):
            fail("report", "rank %d ended with %s, killed_by_launcher %s" % (r, e["status"], e["killed_by_launcher"]))


def _check_report(plan, server, want, record, text, fail):
    if want.first_failure is not None and plan.caller == "python" and want.outcome == "runtime_error" and \
            record.get("rank") != want.first_failure:
        fail("report", "DistributedRuntimeError.rank %s, expected %s" % (record.get("rank"), want.first_failure))
    first, others = parse_report(text)
    expected_others = set(server.ranks()) - {want.first_failure}
    if first != want.first_failure or set(others) != expected_others:
        fail("report", "the report names first %s and lists %d other rank(s) %s, expected %s and %d: %s" % (
            first, len(others), sorted(set(others) ^ expected_others)[:10], want.first_failure,
            len(expected_others), text[-800:]))
    for words in want.words:
        if words not in text:
            fail("report", "the report does not say %r: %s" % (words, text[-800:]))


def _check_logs(result, plan, server, summary, run_dir, chaos, written, fail):
    verified = verify_logs(chaos, run_dir, server.first, server.count)
    for e in summary["ranks"]:
        r = e["rank"]
        valid, size = verified.get(r, (-1, -1))
        if size < 0:
            fail("log", "rank %d has no log file" % r)
            result.bytes_lost += written[r]
            continue
        result.bytes_written += written[r]
        result.bytes_logged += size
        if valid < size:
            result.bytes_corrupt += size - valid
            fail("log", "rank %d: log differs from its stream at byte %d of %d" % (r, valid, size))
        if size < written[r]:
            result.bytes_lost += written[r] - size
            fail("log", "rank %d: log holds %d bytes, the rank wrote %d" % (r, size, written[r]))
        own = plan.behaviours[r].own_code()
        if own is not None and _status_code(e) == own and size != written[r]:
            fail("log", "rank %d ended by itself but its log holds %d bytes, it wrote %d" % (r, size, written[r]))
        if e["output_bytes"] != size:
            fail("log", "rank %d: summary output_bytes %d, log file %d bytes" % (r, e["output_bytes"], size))
