"""What a job looks like while it runs and when it is over: one row per rank
of this machine (rank, device, pid, state, time, last line), rendered as an
HTML table for notebooks and as aligned text elsewhere.

The model is fed by the live output (lines, progress lines, exits) and
finished from the JobResult; it never reads a process or a file itself.
"""

import html
import re
import time

from . import _core

# Rank colours for HTML, cycling by rank id: the CSS match of the ANSI
# colours of streams (console_sink.hpp rank_colour(): 34, 35, 36, 94, 95,
# 96). Blues, magentas and cyans that read on light and dark backgrounds:
# red, green and amber are left for failed, done and stopped.
CSS_COLOURS = ("#1f6feb", "#a23cbf", "#0f8b8d", "#4169e1", "#c04fc0", "#1b9fb5")

# The last line kept per rank for the status table, in terminal columns (a
# CJK character takes two).
LAST_LINE_COLUMNS = 120

# Terminal control sequences (CSI such as colours and cursor moves, OSC such
# as titles, other two-byte escapes) and control characters: what a rank
# wrote for a terminal, not for a table cell.
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]?|[\x00-\x08\x0b-\x1f\x7f]")


# MindSpore's scheduler (rank -1, prefix "[sched]"): no rank's colour, the
# yellow of the terminal's (console_sink.hpp colourize_prefixes).
SCHEDULER_COLOUR = "#9a6700"


def rank_colour(rank):
    """The CSS colour of `rank`'s prefix (-1: the scheduler's)."""
    return SCHEDULER_COLOUR if rank < 0 else CSS_COLOURS[rank % len(CSS_COLOURS)]


def plain(text):
    """`text` without terminal control sequences and control characters."""
    return _CONTROL.sub("", text)


def _clip(text, limit=LAST_LINE_COLUMNS):
    text = plain(text.replace("\t", " ")).rstrip()
    return text if _core.display_width(text) <= limit else _core.fit_width(text, limit - 1) + "\u2026"


def _duration(seconds):
    seconds = max(0.0, seconds)
    if seconds < 60:
        return "%.1f s" % seconds
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return "%d:%02d:%02d" % (hours, minutes, secs)


def _rate(bytes_per_s):
    """Output bytes a second in short words: "850 B/s", "1.2 KB/s"."""
    for unit in ("B/s", "KB/s", "MB/s"):
        if bytes_per_s < 1024 or unit == "MB/s":
            return ("%d %s" if unit == "B/s" else "%.1f %s") % (bytes_per_s, unit)
        bytes_per_s /= 1024.0


def describe_exit(exit_code, signal, stopped_by_launcher):
    """("done" | "failed" | "stopped", text): how a rank ended, in words: the
    core's for an exit code or a signal (as in RankResult.status)."""
    if exit_code == 0:
        return "done", "exited 0"
    if exit_code is None and signal is None:
        return "failed", "unknown exit status"  # short for a table cell; the core's words add why
    text = _core.describe_exit(exit_code, signal)
    if stopped_by_launcher:
        return "stopped", "stopped: " + text
    return "failed", text


class RankRow:
    """One rank of this machine (or MindSpore's scheduler, rank -1) in the view."""

    __slots__ = ("rank", "label", "device", "pid", "state", "status", "ended", "last_line", "progress", "shown_at_end",
                 "step", "rate", "slow")

    def __init__(self, rank, device, pid):
        self.rank = rank
        self.label = "sched" if rank < 0 else str(rank)  # the console's "[sched]"
        self.device = "-" if rank < 0 else device
        self.pid = pid
        self.state = "running"  # running | done | failed | stopped
        self.status = "running"
        self.ended = None  # time.monotonic() of its exit
        self.last_line = ""
        self.progress = ""  # the line it is redrawing now ('\r'), if any
        self.shown_at_end = False  # last_line comes from its log file
        self.step = ""  # its progress as the supervisor read it ("epoch 2 step 45/100"), rank_progress.hpp
        self.rate = 0  # its output bytes a second
        self.slow = ""  # why it is slow (docs/job-record.md), "" when it is not


class JobStatus:
    """The state of every rank of this machine, for the status view.

    `plan`: the LaunchPlan; `pids`: the ranks' pids in plan order;
    `shown`: the rank ids whose output comes live (None: all).
    """

    def __init__(self, plan, pids, run_dir, shown=None):
        self.job_id = plan.job_id
        self.server_id = plan.server_id
        self.world_size = plan.world_size
        self.run_dir = run_dir
        self.started = time.monotonic()
        self.rows = [RankRow(r.rank, r.physical_device_id, pid) for r, pid in zip(plan.ranks, pids)]
        self.shown = None if shown is None else set(shown)
        self.lines_seen = 0  # lines that reached the view's recent output, shown or skipped
        self.outcome = None  # set by finish(): "succeeded" | "failed" | "stopped" | "timed out" | ...
        self.first_failure = None  # RankRow
        self.root_cause = []  # the first failure's exception line and error-code line, those it has
        self.duration = None
        self.attempt = 1  # a job that restarts: the attempt running now
        self.max_restarts = plan.max_restarts
        self.metrics = None  # a _metrics_view.MetricsReader: the ranks' log_metric() charts, set by _live

    # ---------------------------------------------------------- feeding

    def _row(self, index):
        return self.rows[index] if 0 <= index < len(self.rows) else None

    def feed_last_line(self, index, text):
        """`text` is the latest whole line of the rank at `index` (its position in the plan)."""
        row = self._row(index)
        if row is not None:
            row.last_line = _clip(text)

    def feed_progress(self, index, text):
        """`text` is what the unfinished line of the rank at `index` shows now ("" once finished)."""
        row = self._row(index)
        if row is not None:
            row.progress = _clip(text)

    def feed_status(self, index, progress, bytes_per_s, slow, why):
        """The supervisor's word on the rank at `index`: its progress, output rate and slowness."""
        row = self._row(index)
        if row is not None:
            row.step, row.rate, row.slow = _clip(progress), bytes_per_s, (why or "behind the others") if slow else ""

    def _status(self, row):
        """"running, epoch 2 step 45/100, 1.2 KB/s" while it runs; "slow: ..." when behind."""
        if row.state != "running":
            return row.status
        if row.slow:
            return "slow: " + row.slow
        parts = [row.status] + ([row.step] if row.step else []) + ([_rate(row.rate)] if row.rate else [])
        return ", ".join(parts)

    def feed_exit(self, index, exit_code, signal, stopped_by_launcher):
        """The rank at `index` exited (exit code or signal; stopped by the launcher first or not)."""
        row = self._row(index)
        if row is None:
            return
        row.state, row.status = describe_exit(exit_code, signal, stopped_by_launcher)
        row.ended = time.monotonic()
        row.progress = ""

    def feed_attempt(self, attempt, pids):
        """A job that restarts started attempt `attempt`: every rank runs again, with `pids` (by index)."""
        self.attempt = attempt
        for row, pid in zip(self.rows, pids):
            row.pid = pid
            row.state = row.status = "running"
            row.ended = None
            row.last_line = row.progress = row.step = row.slow = ""
            row.rate = 0
        self.first_failure = None

    def finish(self, result, read_last_line=None, read_root_cause=None):
        """Takes the final word from the JobResult (exit statuses, times).
        `read_last_line(path)`, if given, reads each rank's last line from its
        log file: the record of truth, also for ranks not shown live.
        `read_root_cause(path)`, if given, reads the root cause of the first
        failed rank from its log (an object with `exception` and `error_code`,
        as _core.root_cause() returns): its row then shows the exception line
        instead of its last line, and the view shows both lines, whether
        that rank was shown live or not."""
        # Times count from the first attempt's start (the view's own).
        first = result.attempts[0].started if result.attempts else None
        self.attempt = len(result.attempts) or 1
        for row, rank in zip(self.rows, result.ranks):
            row.state, row.status = describe_exit(rank.exit_code, rank.signal, rank.terminated_by_launcher)
            row.progress = ""
            row.pid = rank.pid
            row.ended = self.started + max(0.0, rank.ended - (rank.started if first is None else first))
            if read_last_line is not None:
                row.last_line = _clip(read_last_line(rank.log_path))
                row.shown_at_end = True
        if result.first_failure is not None:
            self.first_failure = self.rows[result.first_failure]
            if read_root_cause is not None:
                cause = read_root_cause(result.ranks[result.first_failure].log_path)
                self.root_cause = [_clip(line) for line in (cause.exception, cause.error_code) if line.strip()]
                if self.root_cause and cause.hint:
                    self.root_cause.append("hint: " + plain(cause.hint))  # whole: it says what to do
                if self.root_cause:
                    self.first_failure.last_line = self.root_cause[0]
                    self.first_failure.shown_at_end = True
        self.outcome = {
            "none": "succeeded" if result.success else "failed",
            "rank_failed": "failed",
            "requested": "stopped",
            "timed_out": "timed out",
            "launcher_gone": "stopped",
            "signaled": "stopped by signal %d" % result.stop_signal,
            "stalled": "stalled",
            "peer_failed": "failed on another server",
            "peer_stopped": "stopped on another server",
            "peer_lost": "stopped: another server was lost",
        }.get(result.stop_reason, "failed")
        if result.stopped_in == "waiting_for_servers":
            self.outcome += " while waiting for the other servers"
        self.duration = max([row.ended - self.started for row in self.rows] or [0.0])

    # ---------------------------------------------------------- rendering

    def _elapsed(self, row, now):
        return _duration((row.ended if row.ended is not None else now) - self.started)

    def _last(self, row):
        if self.shown is not None and row.rank not in self.shown and not row.shown_at_end:
            return "(log file only)"
        return row.progress or row.last_line

    def _attempt_text(self):
        """", attempt 2 of 4" for a job that restarts, else ""."""
        return ", attempt %d of %d" % (self.attempt, self.max_restarts + 1) if self.max_restarts else ""

    def headline(self):
        n = sum(1 for row in self.rows if row.rank >= 0)
        where = "%d rank(s) of %d%s on server %s" % (
            n, self.world_size, " and the scheduler" if n < len(self.rows) else "", self.server_id)
        if self.outcome is None:
            running = sum(1 for row in self.rows if row.state == "running")
            return "davincirun job %s: %s, %d running%s" % (self.job_id, where, running, self._attempt_text())
        text = "davincirun job %s: %s, %s in %s%s" % (self.job_id, where, self.outcome, _duration(self.duration),
                                                     self._attempt_text())
        if self.first_failure is not None:
            failed = self.first_failure
            text += "; first failure: %s (%s)" % (
                "scheduler" if failed.rank < 0 else "rank %d" % failed.rank, failed.status)
        return text

    def table_rows(self, now=None):
        """[(rank, device, pid, status, time, last line)] as strings."""
        now = time.monotonic() if now is None else now
        return [
            (row.label, str(row.device), str(row.pid), self._status(row), self._elapsed(row, now), self._last(row))
            for row in self.rows
        ]

    def text(self, now=None, tail=None):
        """The view as plain text: a headline, an aligned table, the log
        directory, and `tail` (recent lines, str) if given."""
        header = ("rank", "device", "pid", "status", "time", "last output")
        rows = [header] + self.table_rows(now)
        widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
        lines = [self.headline()]
        for r in rows:
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths)) + "  " + r[-1])
        lines.extend(self._root_cause_lines())
        lines.extend(self.metrics.text_lines() if self.metrics is not None else [])
        lines.append("logs: %s" % self.run_dir)
        text = "\n".join(line.rstrip() for line in lines) + "\n"
        if tail:
            text += "recent output%s:\n%s" % (self._skip_note(tail), plain(tail))
        return text

    def _root_cause_lines(self):
        """["root cause (rank 1): RuntimeError: ...", "  EI0006: ..."], or []."""
        if not self.root_cause or self.first_failure is None:
            return []
        failed = self.first_failure
        who = "scheduler" if failed.rank < 0 else "rank %d" % failed.rank
        head = "root cause (%s): %s" % (who, self.root_cause[0])
        return [head] + ["  " + line for line in self.root_cause[1:]]

    def _skip_note(self, tail):
        shown = tail.count("\n")
        if self.lines_seen <= shown:
            return ""
        return " (the last %d of %d lines; the log files have every line)" % (shown, self.lines_seen)

    def html(self, now=None, tail=None):
        """The view as an HTML fragment (inline styles only: front ends strip <style>)."""
        state_colour = {"running": "inherit", "done": "#2e8b2e", "failed": "#d1242f", "stopped": "#8a6d00",
                        "slow": "#b35900"}
        cell = "padding:1px 8px;text-align:left;"
        out = ['<div class="davincirun-job" style="font-family:monospace;font-size:12px">']
        out.append("<div><b>%s</b></div>" % html.escape(self.headline()))
        out.append('<table style="border-collapse:collapse;margin:2px 0">')
        headers = ("rank", "device", "pid", "status", "time", "last output")
        out.append("<tr>%s</tr>" % "".join('<th style="%s">%s</th>' % (cell, h) for h in headers))
        for row, values in zip(self.rows, self.table_rows(now)):
            rank, device, pid, status, elapsed, last = (html.escape(v) for v in values)
            out.append(
                '<tr><td style="%scolor:%s"><b>%s</b></td><td style="%s">%s</td><td style="%s">%s</td>'
                '<td style="%scolor:%s">%s</td><td style="%s">%s</td><td style="%swhite-space:pre">%s</td></tr>'
                % (cell, rank_colour(row.rank), rank, cell, device, cell, pid,
                   cell, state_colour.get("slow" if row.slow and row.state == "running" else row.state, "inherit"),
                   status, cell, elapsed, cell, last)
            )
        out.append("</table>")
        for line in self._root_cause_lines():
            out.append('<div style="color:#d1242f;white-space:pre">%s</div>' % html.escape(line))
        out.append(self.metrics.html() if self.metrics is not None else "")
        out.append("<div>logs: %s</div>" % html.escape(self.run_dir))
        if tail:
            out.append('<div>recent output%s:</div><pre style="margin:0">%s</pre>'
                       % (html.escape(self._skip_note(tail)), _html_lines(tail)))
        out.append("</div>")
        return "".join(out)


def _html_lines(text):
    """Recent output lines as HTML, each rank prefix in its colour."""
    parts = []
    for line in plain(text).splitlines():
        match = re.match(r"^(\[(?:rank (\d+)|sched)\]\+?)( .*)?$", line)
        if match:
            rank = int(match.group(2)) if match.group(2) else -1
            parts.append(
                '<span style="color:%s">%s</span>%s'
                % (rank_colour(rank), html.escape(match.group(1)), html.escape(match.group(3) or ""))
            )
        else:
            parts.append(html.escape(line))
    return "\n".join(parts)
