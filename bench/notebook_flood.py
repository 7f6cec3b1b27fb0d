"""Notebook flood benchmark: 8 ranks each write lines as fast as they can
inside a real Jupyter kernel (ipykernel 7 from scripts/notebook_env.sh, run
by nbclient), through start_and_wait_distributed_train.

Prints what the kernel sent on IOPub for the cell (messages and bytes on the
wire, per second, worst 1 s window) against jupyter_server's default limits
(iopub_data_rate_limit 1,000,000 bytes/s, iopub_msg_rate_limit 1,000
messages/s, averaged over rate_limit_window 3 s), how many lines were shown
and how many were counted as not shown, and checks that every line is in the
log files.

Usage: python bench/notebook_flood.py [--ranks 8] [--lines 100000] [--kernel davincirun-ipykernel7]
"""

import argparse
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python", "support"))
from _common import write_table  # noqa: E402
from notebook_support import cell_text, execute_notebook, kernel_problem  # noqa: E402

WRITER = (
    "import os, sys\n"
    "rank = os.environ['RANK_ID']\n"
    "for i in range(%d):\n"
    "    sys.stdout.write('rank %%s line %%07d of the flood benchmark\\n' %% (rank, i))\n"
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--lines", type=int, default=100000, help="lines per rank")
    parser.add_argument("--kernel", default="davincirun-ipykernel7")
    args = parser.parse_args()
    problem = kernel_problem(args.kernel)
    if problem:
        sys.exit(problem)

    with tempfile.TemporaryDirectory(prefix="davincirun-bench-") as tmp:
        table = write_table(os.path.join(tmp, "table.json"), args.ranks)
        env = {"DAVINCIRUN_LOCK_DIR": os.path.join(tmp, "locks")}
        cell = (
            "import sys\nfrom davincirunsdk import start_and_wait_distributed_train\n"
            "start_and_wait_distributed_train([sys.executable, '-c', %r], rank_table=%r, log_dir=%r)"
            % (WRITER % args.lines, table, os.path.join(tmp, "log"))
        )
        messages = []
        started = time.monotonic()
        nb = execute_notebook([cell], args.kernel, cwd=tmp, env=env, iopub=messages, timeout=600)
        elapsed = time.monotonic() - started

        text = cell_text(nb.cells[0], displays=False, ansi=False)
        shown = len(re.findall(r"^\[rank \d+\] rank \d+ line \d{7} ", text, re.M))
        skipped = sum(int(n) for n in re.findall(r"^\[davincirun\] (\d+) line\(s\) not shown here", text, re.M))
        run_dir = os.path.join(tmp, "log", "latest")
        in_logs = 0
        for name in os.listdir(run_dir):
            if name.endswith(".log"):
                with open(os.path.join(run_dir, name), "rb") as f:
                    in_logs += f.read().count(b"\n")

        sent = sorted((m.sent.timestamp(), m.wire_bytes) for m in messages if m.cell_index == 0 and m.sent)
        span = max(sent[-1][0] - sent[0][0], 1e-9)
        worst_bytes = worst_count = 0
        for i, (start, _) in enumerate(sent):
            window = [size for when, size in sent[i:] if when < start + 1.0]
            worst_bytes = max(worst_bytes, sum(window))
            worst_count = max(worst_count, len(window))
        total_bytes = sum(size for _, size in sent)
        total = args.ranks * args.lines

        print("kernel %s, %d ranks x %d lines (%.1f MB written), cell took %.2f s"
              % (args.kernel, args.ranks, args.lines, total * 40 / 1e6, elapsed))
        print("IOPub for the cell: %d messages, %.0f KB over %.2f s" % (len(sent), total_bytes / 1e3, span))
        print("  worst 1 s window: %d messages (limit 1000/s), %.0f KB (limit 1000 KB/s): %.0f%% of the byte limit"
              % (worst_count, worst_bytes / 1e3, worst_bytes / 1e4))
        print("lines: %d shown + %d counted as not shown = %d of %d written (%s); log files: %d lines (%s)"
              % (shown, skipped, shown + skipped, total, "exact" if shown + skipped == total else "MISMATCH",
                 in_logs, "all" if in_logs == total else "MISSING"))
        print("'IOPub data rate exceeded' in the cell: %s" % ("yes" if "IOPub data rate exceeded" in text else "no"))


if __name__ == "__main__":
    main()
