"""What a SIGKILLed launcher leaves behind.

8 ranks start; each also leaves a daemon behind (double fork + setsid, so it
is in no rank's process group and is re-parented away from its rank). Once
every rank and daemon is up, the launcher itself gets SIGKILL, as the OOM
killer or a kernel restart would do. The figures: how many of the job's
processes are still alive 3 s later, and how long until none was left.
Compared with a bare bash loop (`for ...; do ... & done; wait`) run in the
same script. Survivors are killed by pid afterwards.

run_killed() is also what bench/compare.py uses for every other launcher.

Usage: python bench/launcher_killed.py [--ranks 8] [--repeat 3]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import MARKER, davincirun_path, kill_all, marked, write_table  # noqa: E402

# argv[1]: a directory where each rank, once its daemon is up, creates a file
# named by its pid: the job is up when there is one per rank.
RANK = r"""
import os, sys, time
ready = sys.argv[1]
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        fd = os.open(os.devnull, os.O_RDWR)
        for n in (0, 1, 2):
            os.dup2(fd, n)
        os.write(w, b"x")
        time.sleep(600)
    os._exit(0)
os.read(r, 1)
open(os.path.join(ready, str(os.getpid())), "w").close()
time.sleep(600)
"""


def run_killed(argv, env, ready_dir, ranks, cwd=None, settle=3.0, up_timeout=120.0, tag=None):
    """Starts `argv` (a launcher of `ranks` ranks running RANK with `ready_dir`)
    with MARKER set to `tag` (default: a new one), SIGKILLs it once every
    rank and daemon is up, and returns (processes of the job alive `settle` s
    later, seconds until none was left or None). Survivors are SIGKILLed by
    pid. Raises RuntimeError when the job does not come up."""
    tag = tag or uuid.uuid4().hex
    env = dict(env, **{MARKER: tag})
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + up_timeout
        while len(os.listdir(ready_dir)) < ranks:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the job did not come up (%d of %d ranks ready, launcher %s)"
                                   % (len(os.listdir(ready_dir)), ranks,
                                      "running" if proc.poll() is None else "exited %d" % proc.returncode))
            time.sleep(0.02)
        time.sleep(0.2)
        killed_at = time.monotonic()
        proc.kill()
        proc.wait()
        gone_after = None
        while time.monotonic() - killed_at < settle:
            if not marked(tag):
                gone_after = time.monotonic() - killed_at
                break
            time.sleep(0.005)
        return len(marked(tag)), gone_after
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_all(marked(tag))


def one_run(launcher, tmp, ranks):
    ready = tempfile.mkdtemp(dir=tmp)
    if launcher == "bash loop":
        loop = 'for i in $(seq 0 %d); do RANK_ID=$i "$0" -c "$1" "$2" & done; wait' % (ranks - 1)
        argv = ["bash", "-c", loop, sys.executable, RANK, ready]
    else:
        table = write_table(os.path.join(tmp, "t.json"), ranks)
        argv = [davincirun_path(), "-q", "-r", table, "-l", os.path.join(tmp, "log"), "--grace-period", "1",
                sys.executable, "-c", RANK, ready]
    try:
        return run_killed(argv, os.environ, ready, ranks)
    except RuntimeError as e:
        sys.exit("%s: %s" % (launcher, e))


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
