"""The ranks' metrics in the status view: reads what ``log_metric()`` wrote
into ``<run dir>/metrics/rank_<RANK>.jsonl`` for this server's ranks, as the
files grow, and draws one small chart (inline SVG) per rank and metric name,
with its last value and step.

Reading is incremental and bounded: each file is read from where the last
read ended, whole lines only (a line still being written waits for the next
read), at most READ_LIMIT new bytes a read (a file that grew more is read
from its last READ_LIMIT bytes), at most once a POLL_SECONDS; KEEP points are
kept per rank and name; a line that is not a record is skipped and counted.
Nothing here may stop a job or its view: an error reading a file leaves its
charts as they were.
"""

import collections
import html
import json
import math
import os
import threading
import time

from ._job_view import rank_colour

# Seconds between two reads of the files, at least.
POLL_SECONDS = 1.0
# Points kept per rank and metric name (the newest).
KEEP = 200
# New bytes read from one file at one read, at most.
READ_LIMIT = 1 << 20
# Metric names shown as columns, at most (in the order they first appear).
MAX_NAMES = 12
# The charts, in pixels, and the points drawn in one at most.
WIDTH, HEIGHT, DRAWN = 120, 22, 60
# The points drawn in all charts together, at most (about 12 bytes each): the
# view is sent up to twice a second, and 16 ranks of 12 metrics must stay
# far inside the notebook server's 1 MB/s. Each chart draws at least MIN_DRAWN.
DRAWN_TOTAL, MIN_DRAWN = 3000, 12


class Series:
    """The newest points of one metric of one rank, of the latest attempt seen."""

    __slots__ = ("attempt", "points", "nonfinite")

    def __init__(self, attempt):
        self.attempt = attempt
        self.points = collections.deque(maxlen=KEEP)  # (step or None, value or None, time)
        self.nonfinite = None  # "nan" | "inf" | "-inf" when the last value is one


class _File:
    __slots__ = ("offset", "resync")

    def __init__(self):
        self.offset = 0
        self.resync = False  # skipped ahead: what comes before the first newline is a piece of a line


def parse_record(line):
    """(name, value or None, step or None, attempt, time, nonfinite or None)
    from one line of a metrics file, or None when it is not a record."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    name, value, step = record.get("name"), record.get("value"), record.get("step")
    attempt, when = record.get("attempt", 1), record.get("time")
    if not isinstance(name, str) or not name:
        return None
    if isinstance(value, bool) or not (value is None or isinstance(value, (int, float))):
        return None
    if value is not None and not math.isfinite(value):
        return None
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        return None
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        return None
    if isinstance(when, bool) or not isinstance(when, (int, float)):
        return None
    nonfinite = record.get("nonfinite") if value is None else None
    if value is None and nonfinite not in ("nan", "inf", "-inf"):
        return None
    return name, (None if value is None else float(value)), step, attempt, float(when), nonfinite


class MetricsReader:
    """The metrics of `ranks` (this server's rank ids) in `run_dir`, for the
    status view; `world_size`: every server's ranks, to say when some are
    elsewhere. JobStatus renders it through html() and text_lines()."""

    def __init__(self, run_dir, ranks, world_size):
        self.folder = os.path.join(run_dir, "metrics")
        self.ranks = list(ranks)
        self.world_size = world_size
        self.series = {rank: collections.OrderedDict() for rank in self.ranks}  # rank -> name -> Series
        self.names = []  # every name seen, in the order of first appearance
        self.skipped = 0  # lines that were not records
        self._files = {rank: _File() for rank in self.ranks}
        self._polled = None
        # The view's thread and a thread calling job.poll() may read and render at once.
        self._lock = threading.Lock()

    # ------------------------------------------------------------ reading

    def poll(self, force=False):
        """Reads what the files gained, unless the last read is less than
        POLL_SECONDS old (`force`: read anyway, e.g. at the end of the job)."""
        with self._lock:
            now = time.monotonic()
            if not force and self._polled is not None and now - self._polled < POLL_SECONDS:
                return
            self._polled = now
            for rank in self.ranks:
                try:
                    self._read(rank)
                except (OSError, MemoryError):
                    pass  # missing (not written yet), removed, unreadable: the charts stay as they are

    def _read(self, rank):
        state = self._files[rank]
        with open(os.path.join(self.folder, "rank_%d.jsonl" % rank), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < state.offset:  # cut short by someone: read it again
                state.offset, state.resync = 0, False
            if size - state.offset > READ_LIMIT:  # far behind: the newest lines matter
                state.offset, state.resync = size - READ_LIMIT, True
            if size == state.offset:
                return
            f.seek(state.offset)
            data = f.read(min(size - state.offset, READ_LIMIT))
        end = data.rfind(b"\n")
        if end < 0:
            return  # no whole line yet
        chunk = data[: end + 1]
        state.offset += end + 1
        if state.resync:
            state.resync = False
            chunk = chunk[chunk.find(b"\n") + 1:]
        for line in chunk.split(b"\n")[:-1]:
            self._add(rank, line)

    def _add(self, rank, line):
        try:
            record = parse_record(line.decode("utf-8"))
        except UnicodeDecodeError:
            record = None
        if record is None:
            if line.strip():
                self.skipped += 1
            return
        name, value, step, attempt, when, nonfinite = record
        series = self.series[rank]
        entry = series.get(name)
        if entry is None or attempt > entry.attempt:  # a new attempt starts its charts again
            entry = series[name] = Series(attempt)
            if name not in self.names:
                self.names.append(name)
        elif attempt < entry.attempt:
            return
        entry.points.append((step, value, when))
        entry.nonfinite = nonfinite

    # ------------------------------------------------------------ rendering

    def _scale(self, name):
        """(lowest, highest) finite value of `name` over every rank: one
        scale for a metric's charts, so that a rank apart from the others
        shows as such; None when there is no finite value."""
        values = [value for rank in self.ranks if name in self.series[rank]
                  for _, value, _ in self.series[rank][name].points if value is not None]
        return (min(values), max(values)) if values else None

    def _elsewhere(self):
        """The note on ranks of other servers, or ""."""
        if self.world_size <= len(self.ranks):
            return ""
        return ("only this server's %d rank(s) of %d are charted: the ranks on other servers write their "
                "metrics on their own servers" % (len(self.ranks), self.world_size))

    def _notes(self):
        notes = []
        if len(self.names) > MAX_NAMES:
            notes.append("%d more metric name(s) not shown (the metrics files have them)"
                         % (len(self.names) - MAX_NAMES))
        if self.skipped:
            notes.append("%d line(s) of the metrics files are not records and were skipped" % self.skipped)
        elsewhere = self._elsewhere()
        if elsewhere:
            notes.append(elsewhere)
        return notes

    def text_lines(self):
        """The last value and step of every metric of every rank, as lines of
        text; [] while no rank has logged one."""
        with self._lock:
            return self._text_lines()

    def _text_lines(self):
        if not self.names:
            return []
        lines = ["metrics (last value, step):"]
        for rank in self.ranks:
            parts = ["%s %s" % (name, last_text(entry)) for name, entry in self.series[rank].items()
                     if name in self.names[:MAX_NAMES]]
            if parts:
                lines.append("  rank %d: %s" % (rank, ", ".join(parts)))
        lines.extend("  " + note for note in self._notes())
        return lines

    def html(self):
        """The charts: a table of one row per rank and one column per metric
        name (inline SVG, inline styles only); "" while no rank has logged one."""
        with self._lock:
            return self._html()

    def _html(self):
        if not self.names:
            return ""
        names = self.names[:MAX_NAMES]
        charts = sum(1 for rank in self.ranks for name in names if name in self.series[rank])
        drawn = max(MIN_DRAWN, min(DRAWN, DRAWN_TOTAL // max(1, charts)))
        scales = {name: self._scale(name) for name in names}
        cell = "padding:1px 8px;text-align:left;"
        out = ['<div style="margin-top:4px">metrics (the newest %d points of each, last value and step):</div>' % KEEP,
               '<table style="border-collapse:collapse;margin:2px 0">',
               "<tr><th style=\"%s\">rank</th>%s</tr>" % (cell, "".join(
                   '<th style="%s">%s</th>' % (cell, html.escape(name)) for name in names))]
        for rank in self.ranks:
            cells = []
            for name in names:
                entry = self.series[rank].get(name)
                if entry is None:
                    cells.append('<td style="%s"></td>' % cell)
                    continue
                cells.append('<td style="%swhite-space:nowrap" class="davincirun-metric" data-rank="%d" '
                             'data-name="%s">%s <span>%s</span></td>'
                             % (cell, rank, html.escape(name), sparkline(entry, rank_colour(rank), drawn, scales[name]),
                                html.escape(last_text(entry))))
            out.append('<tr><td style="%scolor:%s"><b>%d</b></td>%s</tr>' % (cell, rank_colour(rank), rank,
                                                                         "".join(cells)))
        out.append("</table>")
        out.extend("<div>%s</div>" % html.escape(note) for note in self._notes())
        return "".join(out)


def number_text(value):
    """A value as the view writes it: 4 significant digits."""
    return "%.4g" % value


def last_text(entry):
    """"0.2500 @ step 100" for the newest point of `entry` (a Series)."""
    step, value, _ = entry.points[-1]
    text = entry.nonfinite if value is None else number_text(value)
    if step is not None:
        text += " @ step %d" % step
    if entry.attempt > 1:
        text += " (attempt %d)" % entry.attempt
    return text


def sparkline(entry, colour, drawn=DRAWN, scale=None):
    """An inline SVG chart of the points of `entry`: at most `drawn` of them
    (evenly picked, the newest always), x by their order, y from the lowest
    to the highest value of `scale` (low, high), else of the points; a NaN
    or infinity breaks the line."""
    points = list(entry.points)
    values = [value for _, value, _ in points if value is not None]
    if len(points) > drawn:
        stride = len(points) / float(drawn - 1)
        points = [points[int(i * stride)] for i in range(drawn - 1)] + [points[-1]]
    if scale is None:
        scale = (min(values), max(values)) if values else (0.0, 0.0)
    low, high = scale
    span = high - low
    last = len(points) - 1
    path, pen_up = [], True
    for i, (_, value, _) in enumerate(points):
        if value is None:
            pen_up = True
            continue
        x = WIDTH * i / last if last else WIDTH / 2.0
        y = HEIGHT / 2.0 if span == 0 else 1 + (HEIGHT - 2) * (high - value) / span
        path.append("%s%.1f %.1f" % ("M" if pen_up else "L", x, y))
        pen_up = False
    title = "%d point(s), lowest %s, highest %s" % (len(values), number_text(min(values)), number_text(max(values))) \
        if values else "%d point(s), none finite" % len(entry.points)
    dot = ""
    if points[-1][1] is not None and path:
        x, y = path[-1][1:].split(" ")
        dot = '<circle cx="%s" cy="%s" r="1.5" fill="%s"/>' % (x, y, colour)
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
            'style="vertical-align:middle"><title>%s</title><path d="%s" fill="none" stroke="%s" '
            'stroke-width="1.2"/>%s</svg>' % (WIDTH, HEIGHT, WIDTH, HEIGHT, html.escape(title),
                                             " ".join(path), colour, dot))
