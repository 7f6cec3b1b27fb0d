"""davincirun against every launcher a user might pick, in one interleaved
run, printed as one table (rows: measures; columns: launchers).

Peers (compare_peers.py builds every invocation): a bash loop (each rank
`cmd > rank_i.log 2>&1 &`, the floor) and the same with each rank `| cat >
log` and `| tee log`; the `davincirun` in this Python's scripts directory;
the native davincirun (the package's bin/davincirun, or --davincirun PATH);
the Python API in a `python -c` process and per call in a running
interpreter; davincirunsdk 0.1.5 (in a virtual environment made under
build/bench-venvs/); Open MPI's mpirun; torchrun; MindSpore's msrun. A peer
that is not there is skipped with the reason.

Measures (8 ranks; compare_measures.py): launch+exit (/bin/true, python -c
pass); fail-fast (one rank exits 1, the others obey or ignore SIGTERM); the
log relay (each rank prints 128-byte lines, buffered and unbuffered, console
to a file, a pipe, /dev/null); the launcher SIGKILLed; 64 to 1,024 ranks;
the plan of a 65,536-rank table; one job of 16 servers on this machine, one
rank each, the last failing (compare_servers.py: torchrun's agents, mpirun's
daemons). Method: bench/README.md ("Comparison").

Usage: python3 bench/compare.py [--quick] [--only launch,fail,relay,killed,scale,table,servers]
                                [--repeat N] [--json FILE] [--peers dvr,mpirun,...]
"""

import argparse
import json
import math
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_measures as cm  # noqa: E402
import compare_peers as cp  # noqa: E402
import compare_procs as proc  # noqa: E402
from _common import kill_all, marked  # noqa: E402,F401

WIDTH, LABEL = 12, 36


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a subset of a few minutes: one round, 2 MiB per rank "
                    "relayed to a file console only, no 1,024 ranks, no torchrun or msrun beyond 64 ranks, the "
                    "SIGTERM-ignoring case for the native davincirun only of the davincirun columns")
    ap.add_argument("--only", default=",".join(cm.MEASURES), help="measures: %s" % ",".join(cm.MEASURES))
    ap.add_argument("--peers", help="columns to run (default: all found): %s" % ",".join(cp.TITLES))
    ap.add_argument("--repeat", type=int, help="rounds of launch and fail-fast (obey); a third of it for fail-fast "
                    "(ignore), half for the others (default 6, quick 1)")
    ap.add_argument("--relay-repeat", type=int, help="rounds of each relay cell (default 3, quick 1)")
    ap.add_argument("--relay-mib", type=int, help="MiB each rank writes in the relay (default 32, quick 2)")
    ap.add_argument("--relay-modes", default="buffered,unbuffered")
    ap.add_argument("--relay-consoles", help="where the launcher's console goes (default file,pipe,null; quick "
                    "file): a pipe is read by `cat` into a file")
    ap.add_argument("--scale", help="rank counts (default 64,256,1024; quick 64,256)")
    ap.add_argument("--servers", default="16", help="server counts of the servers measure (default 16)")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--calls", type=int, help="API calls timed per round in one interpreter (default 10, quick 5)")
    ap.add_argument("--cap", type=float, help="seconds a launcher may take to return after a rank failed "
                    "(default 40: torchrun waits 30 s before SIGKILL; quick 12)")
    ap.add_argument("--bash-cap", type=float, default=3.0, help="the same for the bash loop, which never returns")
    ap.add_argument("--timeout", type=float, help="seconds any one run may take (default 120, quick 20): mpirun "
                    "4.1 may hang once its ranks have exited")
    ap.add_argument("--nofile", type=int, default=1024, help="soft RLIMIT_NOFILE of every run (the usual ulimit -n)")
    ap.add_argument("--davincirun", help="the native davincirun to measure (e.g. build/dev/cpp/davincirun)")
    ap.add_argument("--msrun", help="msrun to measure (default: build/mindspore-env/bin/msrun of this checkout "
                    "or of the main one)")
    ap.add_argument("--venv-dir", help="virtual environment of davincirunsdk 0.1.5 (made when missing)")
    ap.add_argument("--json", help="write every sample and summary to this file")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    q = args.quick
    defaults = dict(repeat=(1, 6), relay_repeat=(1, 3), relay_mib=(2, 32), calls=(5, 10), cap=(12.0, 40.0),
                    scale=("64,256", "64,256,1024"), timeout=(20.0, 120.0), relay_consoles=("file", "file,pipe,null"))
    for name, (quick, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if q else full)
    args.scale = [int(n) for n in str(args.scale).split(",")]
    args.servers = [int(n) for n in str(args.servers).split(",")]
    args.only = [m for m in args.only.split(",") if m]
    args.relay_modes = args.relay_modes.split(",")
    args.relay_consoles = args.relay_consoles.split(",")
    unknown = [m for m in args.only if m not in cm.MEASURES]
    if unknown:
        ap.error("unknown measure(s) %s; choose from %s" % (",".join(unknown), ",".join(cm.MEASURES)))
    return args


# -- summaries ----------------------------------------------------------------
def summary(row, cell):
    """{median, min, max, ratio, texts, score}: score orders cells, lower is
    better (for counts the worst run); a run that failed, timed out or never
    ended makes it infinite."""
    samples, texts = cell["samples"], sorted(set(cell["texts"]))
    out = {"texts": texts}
    if samples:
        out.update(median=statistics.median(samples), min=min(samples), max=max(samples))
        out["score"] = max(samples) if row["kind"] == "count" else out["median"]
    if cell["ratios"]:
        out["ratio"] = statistics.median(cell["ratios"])
    if row["kind"] != "text" and texts:
        out["score"] = math.inf
    return out


def number(v):
    if v is None:
        return "-"
    if float(v).is_integer() and abs(v) < 1000:
        return "%d" % v
    if v == 0 or abs(v) >= 100:
        return "%.0f" % v
    return "%.1f" % v if abs(v) >= 10 else ("%.2f" % v if abs(v) >= 0.1 else "%.3f" % v)


def ratio(v):
    return "%.0f" % v if v >= 100 else ("%.1f" % v if v >= 10 else "%.2f" % v)


def cell_lines(row, s, footnotes):
    """The cell's text: line 1 median (×paired ratio) or the verdict, line 2
    the range; a text too long for the column becomes a footnote."""
    if "median" in s:
        if row["kind"] == "count":
            first = number(s["max"]) if s["min"] == s["max"] else "%s-%s" % (number(s["min"]), number(s["max"]))
            second = ""
        else:
            first = number(s["median"]) + (" ×" + ratio(s["ratio"]) if "ratio" in s else "")
            second = "" if s["min"] == s["max"] else "%s-%s" % (number(s["min"]), number(s["max"]))
        if s["texts"]:  # some runs failed or never ended
            footnotes.append("; ".join(s["texts"]))
            second = "[%d]" % len(footnotes)
        return first, second
    if s["texts"]:
        text = " / ".join(s["texts"])
        if len(text) <= WIDTH - 1:
            return text, ""
        footnotes.append(text)
        return "[%d]" % len(footnotes), ""
    return "", ""


def is_ok(row, s):
    text = " ".join(s.get("texts", ()))
    return text.startswith("ok") or text.startswith("whole") and "broken" not in text


def compare_row(key, row, sums, columns):
    """(davincirun's best column or None, [launchers ahead of it]) for a row."""
    if row["kind"] == "text":
        if key.endswith("-rc"):
            return None, []
        dvr = [c for c in cp.DAVINCIRUN if c in sums and sums[c].get("texts")]
        if not dvr:
            return None, []
        best = next((c for c in dvr if is_ok(row, sums[c])), dvr[0])
        ahead = [c for c in cp.LAUNCHERS if c in sums and is_ok(row, sums[c]) and not is_ok(row, sums[best])]
        return best, ahead
    scored = [c for c in cp.DAVINCIRUN if c in sums and "score" in sums[c]]
    if not scored:
        return None, []
    best = min(scored, key=lambda c: sums[c]["score"])
    ahead = [c for c in cp.LAUNCHERS if c in sums and "score" in sums[c] and sums[c]["score"] < sums[best]["score"]]
    return best, ahead


def print_table(b, columns):
    footnotes, behind = [], []
    print("\n%-*s" % (LABEL, "measure (unit; median ×paired ratio; range)") +
          "".join("%*s" % (WIDTH, cp.TITLES[c][:WIDTH - 1]) for c in columns))
    print("-" * (LABEL + WIDTH * len(columns)))
    group = None
    for key, row in b.rows.items():
        sums = {c: summary(row, cell) for c, cell in row["cells"].items()}
        row["summary"] = {c: {k: v for k, v in s.items() if k != "score" or v != math.inf} for c, s in sums.items()}
        best, ahead = compare_row(key, row, sums, columns)
        head, _, label = row["label"].rpartition(": ")
        if head != group:
            print(head + ":")
            group = head
        label = "  " + label + (" (%s)" % row["unit"] if row["unit"] else "")
        lines = [[], []]
        for c in columns:
            first, second = cell_lines(row, sums[c], footnotes) if c in sums else ("", "")
            lines[0].append(first + ("*" if c == best else ""))
            lines[1].append(second)
        print("%-*s" % (LABEL, label[:LABEL - 1]) + "".join(" %*s" % (WIDTH - 1, t) for t in lines[0]))
        if any(lines[1]):
            print("%-*s" % (LABEL, "") + "".join(" %*s" % (WIDTH - 1, t) for t in lines[1]))
        if ahead:
            behind.append("%s: %s" % (row["label"], ", ".join(
                "%s (%s)" % (cp.TITLES[c], cell_lines(row, sums[c], [])[0]) for c in ahead)))
    print("-" * (LABEL + WIDTH * len(columns)))
    print("* davincirun's best cell of the row. Times: median of the runs, ×ratio = median of the paired ratios "
          "(the peer's run / the bash loop run made just before it).")
    for i, text in enumerate(footnotes, 1):
        print("[%d] %s" % (i, text))
    if any(key.startswith("fail-") for key in b.rows):
        print("fail-fast: the bash loop never stops the other ranks; it is not waited for beyond %.0f s "
              "(--bash-cap), the others beyond %.0f s (--cap)" % (b.args.bash_cap, b.args.cap))
    if behind:
        print("davincirun is not ahead of every other launcher (0.1.5, mpirun, torchrun, msrun) in:")
        for line in behind:
            print("  " + line)
    else:
        print("davincirun is ahead of, or level with, every other launcher in every row.")


def main(argv=None):
    args = parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(args.nofile, hard), hard))
    proc.become_subreaper()
    started = time.time()
    print("davincirun compared with other launchers: %d ranks, %s; %s, %d CPUs, Linux %s, Python %s"
          % (args.ranks, "quick" if args.quick else "full", platform.node(), os.cpu_count(), platform.release(),
             platform.python_version()), flush=True)
    print("every run: ulimit -n %d (soft)" % min(args.nofile, hard))
    peers = cp.discover(args, lambda m: print(m, flush=True))
    print("peers:")
    for key, _ in cp.PEERS:
        p = peers[key]
        print("  %-13s %s" % (p.title, p.info if p.available else "skipped: " + p.reason))
    if any(peers[key].available for key in ("dvr-path", "dvr", "api")):
        print("note: davincirun sets PYTHONUNBUFFERED=1 only when its output is watched (a terminal, a notebook); "
              "the relay's consoles here are files, pipes and /dev/null, so its ranks keep Python's buffer unless "
              "the row says unbuffered")
    tmp = tempfile.mkdtemp(prefix="davincirun-compare-")
    logdir_existed = os.path.isdir("/tmp/logdir")
    b = cm.Bench(args, peers, tmp)
    try:
        for name in args.only:
            try:
                batch_start = time.monotonic()
                cm.MEASURES[name](b)
                print("[%s] %.0f s" % (name, time.monotonic() - batch_start), flush=True)
            except Exception:  # one broken measure must not cost the others' figures
                traceback.print_exc()
                b.warnings.append("measure %s stopped by an error (traceback above)" % name)
    except KeyboardInterrupt:
        print("\ninterrupted: the table holds what was measured so far")
    finally:
        left = proc.kill_session(b.session)
        if left:
            print("stopped %d leftover process(es) of this benchmark" % len(left))
        proc.reap()
        for name in os.listdir(tmp):
            if name.startswith("run-"):
                cp.cleanup_v015(os.path.join(tmp, name))
        shutil.rmtree(tmp, ignore_errors=True)
        if not logdir_existed and os.path.isdir("/tmp/logdir") and not os.listdir("/tmp/logdir"):
            os.rmdir("/tmp/logdir")  # made by 0.1.5's runs
    columns = [k for k, _ in cp.PEERS if peers[k].available and any(k in r["cells"] for r in b.rows.values())]
    print_table(b, columns)
    call = b.rows.get("launch-true", {}).get("summary", {}).get("api-call", {})
    if "median" in call:
        print("API per call, %d × /bin/true in a running interpreter: median %.1f ms (target: at most 25 ms)"
              % (args.ranks, call["median"]))
    if b.notes_table:
        print("table: " + b.notes_table)
    for warning in b.warnings:
        print(warning)
    print("took %.0f s" % (time.time() - started))
    if args.json:
        meta = {"args": vars(args), "peers": {k: {"title": p.title, "info": p.info, "skipped": p.reason}
                                               for k, p in peers.items()},
                "warnings": b.warnings, "table_note": b.notes_table, "seconds": time.time() - started}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": b.rows}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
