"""What a SIGKILLed launcher leaves behind.

8 ranks start; each also leaves a daemon behind (double fork + setsid, so it
is in no rank's process group and is re-parented away from its rank). Once
every rank and daemon is up, the launcher itself gets SIGKILL, as the OOM
killer or a kernel restart would do. The figures: how many of the job's
processes are still alive 3 s later, and how long until none was left.
Compared with a bare bash loop (`for ...; do ... & done; wait`) run in the
same script. Survivors are killed by pid afterwards.

Usage: python bench/launcher_killed.py [--ranks 8] [--repeat 3]
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import davincirun_path, write_table  # noqa: E402

RANK = r"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        fd = os.open(os.devnull, os.O_RDWR)
        for n in (0, 1, 2):
            os.dup2(fd, n)
        time.sleep(600)
    os._exit(0)
time.sleep(600)
"""

MARKER = "DAVINCIRUN_BENCH_MARKER"


def marked(tag):
    needle = ("%s=%s" % (MARKER, tag)).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                env = f.read().split(b"\0")
            with open("/proc/%s/stat" % name, "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state != b"Z" and needle in env:
            found.append(int(name))
    return found


def kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def one_run(launcher, tmp, ranks):
    tag = uuid.uuid4().hex
    env = dict(os.environ, **{MARKER: tag})
    if launcher == "bash loop":
        loop = 'for i in $(seq 0 %d); do RANK_ID=$i "$0" -c "$1" & done; wait' % (ranks - 1)
        argv = ["bash", "-c", loop, sys.executable, RANK]
    else:
        table = write_table(os.path.join(tmp, "t.json"), ranks)
        argv = [davincirun_path(), "-q", "-r", table, "-l", os.path.join(tmp, "log"), "--grace-period", "1",
                sys.executable, "-c", RANK]
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        # ranks + daemons (+ the launcher's own processes, which carry the marker too)
        while len([p for p in marked(tag) if p != proc.pid]) < 2 * ranks:
            if time.monotonic() > deadline:
                sys.exit("%s: the job did not come up" % launcher)
            time.sleep(0.05)
        time.sleep(0.2)
        killed_at = time.monotonic()
        proc.kill()
        proc.wait()
        gone_after = None
        while time.monotonic() - killed_at < 3.0:
            if not marked(tag):
                gone_after = time.monotonic() - killed_at
                break
            time.sleep(0.005)
        survivors = marked(tag)
        return len(survivors), gone_after
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_all(marked(tag))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print("launcher SIGKILLed: %d ranks, each with a setsid() daemon, %d repetitions" % (args.ranks, args.repeat))
    print("%-12s %22s %24s" % ("launcher", "alive 3 s after (max)", "all gone after (worst)"))
    with tempfile.TemporaryDirectory() as tmp:
        for launcher in ("bash loop", "davincirun"):
            runs = [one_run(launcher, tmp, args.ranks) for _ in range(args.repeat)]
            alive = max(r[0] for r in runs)
            times = [r[1] for r in runs]
            worst = "never (3 s)" if any(t is None for t in times) else "%.0f ms" % (1000 * max(times))
            print("%-12s %22d %24s" % (launcher, alive, worst))


if __name__ == "__main__":
    main()
