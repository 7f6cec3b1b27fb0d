"""Log relay benchmark: 8 ranks write 256 MiB of output in total.

Compares, in the same run:
  bare    8 processes with stdout/stderr redirected straight to files (what a
          shell loop `cmd > rank_i.log 2>&1 &` does): the floor;
  cat     the same with each rank's output through `| cat > rank_i.log` (one
          more copy of every byte, as the relay makes);
  tee     each rank's output through `| tee rank_i.log` into one console
          file: the two copies the relay makes with a console to a file;
  cli     davincirun, per-rank log files plus the console (stdout to a file);
  cli-null davincirun with the console going to /dev/null.
Each rank writes blocks of --lines-per-write 100-byte lines: 10,000 (1 MB
writes, the default) or 82 (8 KiB, Python's buffer: a fast flood, in which
a launcher's pauses block the writers on full pipes).
The modes run interleaved, once each per round. Prints the best and the
median wall time, their ratios to `bare`'s, the launcher's peak RSS, the CPU of
every process of the run (user + system) beside the wall time it would take
if it kept every CPU busy, and checks
that every log file is byte-identical to what its rank wrote and that every
console line is whole and carries its rank's prefix.

Usage: python bench/log_relay.py [--ranks 8] [--mib 256] [--repeat 3] [--lines-per-write 10000]
"""

import argparse
import hashlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import davincirun_path, launcher_peak_rss_kib, write_table  # noqa: E402

# Each rank writes `per_rank` bytes of 100-byte lines naming itself.
WRITER = r"""
import os, sys
rank = os.environ.get("RANK_ID") or sys.argv[2]
total = int(sys.argv[1])
line = lambda i: ("rank %s line %09d " % (rank, i)).ljust(99, "x") + "\n"
block = "".join(line(i) for i in range(int(sys.argv[3]))).encode()
out = sys.stdout.buffer
written = 0
while written < total:
    chunk = block[: total - written]
    out.write(chunk)
    written += len(chunk)
out.flush()
"""


def expected_digest(rank, size, lines_per_write):
    def line(i):
        return ("rank %s line %09d " % (rank, i)).ljust(99, "x") + "\n"

    block = "".join(line(i) for i in range(lines_per_write)).encode()
    h = hashlib.sha256()
    written = 0
    while written < size:
        chunk = block[: size - written]
        h.update(chunk)
        written += len(chunk)
    return h.hexdigest()


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# Linux's free page reporting (mm/page_reporting.c; a VM's balloon driver
# turns it on): pages freed for a while are handed back to the host, and a
# page that was handed back costs the host's fault when it is used again. On
# this machine a flood after 768 MB were freed and reported took 0.09-0.10 s
# longer and 0.12-0.18 s more CPU than one that reused them at once
# (bench/README.md, "The log relay"). Each run starts once reporting is done.
REPORTED_KIB = "/sys/module/page_reporting/parameters/reported_kib"


def reported_kib():
    try:
        with open(REPORTED_KIB) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def settle():
    """Writes back dirty pages so that no run pays for the previous one's
    writeback (the kernel throttles writers once enough pages are dirty),
    then waits until the kernel has stopped reporting free pages to the
    host (2.5 s without a report, as it reports at most every 2 s:
    PAGE_REPORTING_DELAY; at most 15 s), so that every run finds the free
    memory in the same state."""
    os.sync()
    time.sleep(0.2)
    last = reported_kib()
    if last is None:
        return
    quiet_since = time.monotonic()
    give_up = quiet_since + 15
    while time.monotonic() < give_up and time.monotonic() - quiet_since < 2.5:
        time.sleep(0.1)
        now = reported_kib()
        if now != last:
            last, quiet_since = now, time.monotonic()


def run_bare(tmp, ranks, per_rank, lines_per_write, through=None):
    """The shell loop: straight to files, or `| cat > log` / `| tee log >> console` per rank."""
    settle()
    names = [os.path.join(tmp, "%s_%d.log" % (through or "bare", r)) for r in range(ranks)]
    # tee writes the log itself and its copy to the console file (O_APPEND, as `>>`).
    files = [None] * ranks if through == "tee" else [open(name, "wb") for name in names]
    console = open(os.path.join(tmp, "tee_console.txt"), "ab") if through == "tee" else None
    start = time.perf_counter()
    procs = []
    for r, f in enumerate(files):
        argv = [sys.executable, "-c", WRITER, str(per_rank), str(r), str(lines_per_write)]
        if through:
            pipe = ["cat"] if through == "cat" else ["tee", names[r]]
            copier = subprocess.Popen(pipe, stdin=subprocess.PIPE, stdout=console or f, stderr=subprocess.DEVNULL)
            procs.append(subprocess.Popen(argv, stdout=copier.stdin, stderr=copier.stdin, stdin=subprocess.DEVNULL))
            copier.stdin.close()
            procs.append(copier)
        else:
            procs.append(subprocess.Popen(argv, stdout=f, stderr=f, stdin=subprocess.DEVNULL))
    for p in procs:
        p.wait()
    elapsed = time.perf_counter() - start
    for f in files + [console]:
        if f:
            f.close()
    if through:
        for r, name in enumerate(names):
            if digest(name) != expected_digest(r, per_rank, lines_per_write):
                sys.exit("%s: log of rank %d differs from what it wrote" % (through, r))
    return elapsed, None


def run_cli(tmp, ranks, per_rank, lines_per_write, console_path, tag):
    table = write_table(os.path.join(tmp, "table.json"), ranks)
    log_dir = os.path.join(tmp, "log_" + tag)
    settle()
    with open(console_path, "wb") as console:
        start = time.perf_counter()
        proc = subprocess.Popen([davincirun_path(), "-r", table, "-l", log_dir, sys.executable, "-c", WRITER,
                                 str(per_rank), "-", str(lines_per_write)], stdout=console, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
        # The peak memory is sampled beside the wait, so that the time is
        # taken when the launcher exits, not at the next sample.
        peak = [0]
        done = threading.Event()

        def sample():
            while not done.wait(0.02):
                peak[0] = max(peak[0], launcher_peak_rss_kib(proc.pid))

        sampler = threading.Thread(target=sample)
        sampler.start()
        proc.wait()
        elapsed = time.perf_counter() - start
        done.set()
        sampler.join()
        peak = peak[0]
    if proc.returncode != 0:
        sys.exit("davincirun failed with %d" % proc.returncode)
    run_dir = os.path.join(log_dir, "latest")
    for r in range(ranks):
        path = os.path.join(run_dir, "rank_%d.device_%d.log" % (r, r))
        if digest(path) != expected_digest(r, per_rank, lines_per_write):
            sys.exit("%s: log of rank %d differs from what it wrote" % (tag, r))
    return elapsed, peak


def check_console(path, ranks, per_rank):
    """Every line whole and attributed: '[rank R] rank R line N xxx'."""
    counts = [0] * ranks
    with open(path, "rb") as f:
        for raw in f:
            if not raw.startswith(b"[rank "):
                continue
            prefix, _, rest = raw.partition(b"] ")
            r = int(prefix[6:])
            if not (rest.startswith(b"rank %d line " % r) and len(rest) == 100 and rest.endswith(b"\n")):
                sys.exit("console line split or misattributed: %r" % raw[:120])
            counts[r] += 1
    expected = per_rank // 100
    if counts != [expected] * ranks:
        sys.exit("console line counts %s, expected %d each" % (counts, expected))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--mib", type=int, default=256, help="total MiB written by all ranks")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--lines-per-write", type=int, default=10000,
                    help="100-byte lines in each write of a rank (82: 8 KiB writes, a fast flood)")
    args = ap.parse_args()
    lpw = args.lines_per_write
    per_rank = args.mib * (1 << 20) // args.ranks // 100 * 100
    modes = ("bare", "cat", "tee", "cli", "cli-null")
    results = {mode: [] for mode in modes}  # (wall s, CPU s of every process)
    peaks = {"cli": 0, "cli-null": 0}

    def timed(mode, run, *run_args):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = run(*run_args)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # every process of the run is reaped by now
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        results[mode].append((out[0], cpu))
        if mode in peaks:
            peaks[mode] = max(peaks[mode], out[1])

    def one(mode, tmp):
        if mode in ("bare", "cat", "tee"):
            timed(mode, run_bare, tmp, args.ranks, per_rank, lpw, None if mode == "bare" else mode)
        elif mode == "cli":
            console = os.path.join(tmp, "console.txt")
            timed("cli", run_cli, tmp, args.ranks, per_rank, lpw, console, "cli")
            check_console(console, args.ranks, per_rank)
        else:
            timed("cli-null", run_cli, tmp, args.ranks, per_rank, lpw, os.devnull, "cli-null")

    for round_ in range(args.repeat):
        # Each round starts with another mode: the files of a round's earlier
        # runs are still in the page cache, which would favour the first.
        order = modes[round_ % len(modes):] + modes[:round_ % len(modes)]
        with tempfile.TemporaryDirectory(prefix="davincirun-bench-") as tmp:
            for mode in order:
                one(mode, tmp)
    base = min(results["bare"])[0]
    base_median = statistics.median(wall for wall, _ in results["bare"])
    total_mib = per_rank * args.ranks / (1 << 20)
    cpus = os.cpu_count() or 1
    print("log relay: %d ranks, %.0f MiB in total, writes of %d lines, %d interleaved rounds" % (
        args.ranks, total_mib, lpw, args.repeat))
    print("%-10s %7s %8s %8s %8s %10s %7s %12s" % ("mode", "best s", "vs bare", "median", "vs bare", "peak RSS",
                                                 "CPU s", "CPU / %d CPUs" % cpus))
    for mode in modes:
        best, cpu = min(results[mode])
        median = statistics.median(wall for wall, _ in results[mode])
        rss = "%.1f MiB" % (peaks[mode] / 1024.0) if mode in peaks else "-"
        print("%-10s %7.3f %7.2fx %8.3f %7.2fx %10s %7.2f %12.2f" % (
            mode, best, best / base, median, median / base_median, rss, cpu, cpu / cpus))
    print("CPU s: user + system of every process of the best run (ranks, cat or tee, launcher); CPU / CPUs: the "
          "wall time a run would take if it kept every CPU busy")
    print("log files byte-identical: yes; console lines whole and attributed: yes")


if __name__ == "__main__":
    main()
