"""The status line of `davincirun` on a real terminal: progress bars with a
Chinese description (two columns per character) must never make it wider
than the terminal, or it wraps and every redraw leaves a stale row."""

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import unicodedata

import pytest
from conftest import MARKER_VARIABLE
from pty_support import run_on_pty

DAVINCIRUN = shutil.which("davincirun")
pytestmark = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")

# A tqdm-like bar: "训练进度 epoch 2:  40%|████      | 12/30", redrawn with
# '\r' every 20 ms, finished with '\n'.
BAR_PROGRAM = r"""
import os, sys, time
rank = int(os.environ["RANK_ID"])
out = sys.stdout.buffer
steps = 30
for i in range(steps + 1):
    filled = i * 10 // steps
    bar = "\u2588" * filled + " " * (10 - filled)
    text = "\r\u8bad\u7ec3\u8fdb\u5ea6 epoch %d: %3d%%|%s| %d/%d" % (rank, i * 100 // steps, bar, i, steps)
    out.write(text.encode("utf-8"))
    out.flush()
    time.sleep(0.02)
out.write(b"\n")
out.flush()
"""
RANKS = 4


def final_line(rank):
    return "[rank %d] \u8bad\u7ec3\u8fdb\u5ea6 epoch %d: 100%%|%s| 30/30" % (rank, rank, "\u2588" * 10)


def columns(text):
    """Display columns by Python's own Unicode database (an oracle independent
    of the C++ tables): W and F two, combining and format characters none."""
    width = 0
    for char in text:
        if unicodedata.combining(char) or unicodedata.category(char) in ("Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def job_command(rank_table, job_env):
    return [DAVINCIRUN, "-q", "--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE]),
            "-r", rank_table(RANKS), sys.executable, "-c", BAR_PROGRAM]


def test_status_line_fits_an_80_column_pty(tmp_path, rank_table, job_env):
    """Every status line drawn on an 80-column pty takes at most 79 columns."""
    code, output = run_on_pty(job_command(rank_table, job_env), cwd=tmp_path, columns=80, rows=24)
    assert code == 0, output
    text = output.decode("utf-8")
    # Each draw is "\r<line>\x1b[K"; clearing is "\r\x1b[K".
    drawn = [d for d in re.findall(r"\r([^\r\n]*?)\x1b\[K", text) if d]
    assert any("\u8bad\u7ec3" in d for d in drawn), "no progress bar was drawn: %r" % text[-2000:]
    too_wide = [(columns(d), d) for d in drawn if columns(d) > 79]
    assert not too_wide, too_wide[:3]
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)  # rank prefixes in colour
    for rank in range(RANKS):
        assert final_line(rank) + "\r\n" in plain


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
def test_tmux_screen_holds_no_stale_status_rows(tmp_path, rank_table, job_env):
    """On a real terminal emulator (tmux, 80 columns), the screen and its
    history hold exactly the ranks' finished lines: no row of a status line
    that wrapped and was left behind by its redraws."""
    socket = str(tmp_path / "tmux.sock")
    tmux = ["tmux", "-S", socket, "-f", "/dev/null"]
    env = dict(os.environ, LC_ALL="C.UTF-8")  # tmux measures characters in its own locale
    env.pop("TMUX", None)
    argv = " ".join(shlex.quote(arg) for arg in job_command(rank_table, job_env))
    # The shell writes the job's exit status to a file: tmux 3.3a sometimes
    # shows a dead pane with no #{pane_dead_status} at all.
    status_file = tmp_path / "status"
    command = "cd %s && %s; echo $? > %s" % (shlex.quote(str(tmp_path)), argv, shlex.quote(str(status_file)))
    subprocess.run(tmux + ["start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";",
                           "new-session", "-d", "-x", "80", "-y", "40", "-s", "job", command],
                   env=env, check=True, timeout=30)
    try:
        deadline = time.monotonic() + 60
        while True:
            dead = subprocess.run(tmux + ["display-message", "-p", "-t", "job", "#{pane_dead}"],
                                  stdout=subprocess.PIPE, text=True, check=True, timeout=30).stdout.strip()
            if dead == "1" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert dead == "1", "the job did not end in 60 s"
        assert status_file.read_text().strip() == "0", "the job's exit status"
        screen = subprocess.run(tmux + ["capture-pane", "-p", "-t", "job", "-S", "-", "-E", "-"],
                                stdout=subprocess.PIPE, check=True, timeout=30).stdout.decode("utf-8")
    finally:
        subprocess.run(tmux + ["kill-server"], stderr=subprocess.DEVNULL, timeout=30)
    rows = [row.rstrip() for row in screen.splitlines() if row.strip() and not row.startswith("Pane is dead")]
    assert sorted(rows) == sorted(final_line(rank) for rank in range(RANKS)), "\n".join(rows)
