"""A job's live output in Python: waiting on the job while showing what its
ranks write.

Outside a kernel, lines go to ``sys.stdout`` as they come. In a Jupyter
kernel, a status view (_notebook_view) is displayed in the cell that started
the job, and output is paced to stay well inside the notebook server's IOPub
limits (jupyter_server's defaults: ``iopub_data_rate_limit`` 1,000,000
bytes/s and ``iopub_msg_rate_limit`` 1,000 messages/s, averaged over
``rate_limit_window`` 3 s): the display takes output every FRAME_SECONDS,
at most NOTEBOOK_BUDGET_BYTES of lines each time (or one longer line), and
writes it as one stream message. Lines wait for the next frames, in order,
up to that much again plus one longest line; beyond, the oldest are dropped and counted, so that
a rank's last words are what is shown (the log files keep every byte).
"""

import codecs
import collections
import threading
import time

from . import _core
from ._console import CONSOLE_NONE, CONSOLE_PYTHON, ConsoleWriter, wants_colour
from ._job_view import JobStatus
from ._metrics_view import MetricsReader

# How long a waiting thread sleeps between checks for Ctrl-C, in seconds.
WAKE_SECONDS = 0.1
# In a kernel: how often the display takes output, in seconds (10 stream
# messages per second at most) ...
FRAME_SECONDS = 0.1
# ... and how many bytes of rank lines it shows each time: 24 KiB, so at most
# 240 KiB/s of text (about 0.3 MB/s on the wire with JSON and headers).
NOTEBOOK_BUDGET_BYTES = 24 * 1024
# Seconds between two "lines not shown" notices during a flood.
SKIP_NOTICE_SECONDS = 1.0
# Recent lines kept for the status view of a job whose output cannot stream
# into its starting cell any more.
TAIL_LINES = 20


class LiveOutput:
    """Shows the live output of `core` (a _core.Job started with console
    mode `mode`) and waits for its end. `in_kernel`: running inside an
    IPython kernel (shows a status view); `background`: the job was started
    without waiting (a thread keeps the view current after the starting cell)."""

    def __init__(self, core, plan, mode, ranks_to_show, in_kernel, background, pids):
        self._core = core
        self._pids = pids  # the job's list, kept to the attempt running
        self.mode = mode
        self._in_kernel = in_kernel and mode == CONSOLE_PYTHON
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._writer = ConsoleWriter(colour=wants_colour(self._in_kernel))
        self.status = JobStatus(plan, core.pids, core.run_dir, ranks_to_show)
        # log_metric()'s files of this server's ranks: charted while the job runs, last values at its end.
        self.status.metrics = MetricsReader(core.run_dir, [r.rank for r in plan.ranks if r.rank >= 0],
                                            plan.world_size)
        self._tail = collections.deque(maxlen=TAIL_LINES)
        self._skipped = 0
        self._skip_noted = time.monotonic()
        self._view = None
        if self._in_kernel:
            core.set_display_budget(NOTEBOOK_BUDGET_BYTES)
            try:
                from ._notebook_view import NotebookView

                self._view = NotebookView(self.status)
            except Exception:  # no display machinery: lines still stream
                self._view = None
        self._stop_background = threading.Event()
        self._background = None
        if background and self._view is not None:
            self._background = threading.Thread(
                target=self._run_in_background, name="davincirun-view-%s" % plan.job_id, daemon=True
            )
            self._background.start()

    # ------------------------------------------------------------ waiting

    def wait(self):
        """Shows output until the job is over (this thread; GIL released
        while it sleeps). KeyboardInterrupt and other exceptions propagate;
        the caller stops the job."""
        self._take_over()
        # In the starting cell, lines stream into it; after it, they go into
        # the view of the starting cell, never into the cell running now.
        streaming = self._view is None or not self._view.starting_cell_done.is_set()
        while True:
            if self._in_kernel:
                done = self._core.wait_for(FRAME_SECONDS, on_output=False)
            else:
                done = self._core.wait_for(WAKE_SECONDS, on_output=True)
            self._pump(streaming, final=done)
            if done:
                return

    def _take_over(self):
        if self._background is not None:
            self._stop_background.set()
            self._background.join()
            self._background = None

    def _run_in_background(self):
        view = self._view
        try:
            while not self._stop_background.is_set():
                if self._core.done and self.status.outcome is not None:
                    # Over and summarized, but the starting cell still runs:
                    # a wait() there shows the lines; until then, nothing to do.
                    if not view.starting_cell_done.wait(FRAME_SECONDS):
                        continue
                    done = True
                else:
                    done = self._core.wait_for(FRAME_SECONDS, on_output=False)
                if self._stop_background.is_set():
                    return
                # While the starting cell runs, its lines stay queued for a
                # wait() in it; after it, they go into the view, never into
                # whichever cell runs then.
                cell_done = view.starting_cell_done.is_set()
                self._pump(streaming=False, final=done and cell_done, lines=cell_done)
                if done and self.status.outcome is None:
                    self._summarize(self._core.result())  # the view becomes the summary
                    view.refresh(force=True)
                if done and cell_done:
                    view.refresh(force=True)
                    return
        except Exception:  # the display must never harm the job
            return

    # ------------------------------------------------------------ showing

    def _pump(self, streaming, final=False, lines=True):
        # `final`: the job is over; take every line still held for pacing.
        # `lines`: False leaves the lines queued (only the view is fed).
        data, skipped, progress, exits, last_lines, attempts = self._core.take_output(final, lines)
        text = self._decoder.decode(data) if data else ""
        for _, pids in attempts[-1:]:
            self._pids[:] = pids
        if self._view is not None:
            for index, line in last_lines:
                self.status.feed_last_line(index, line)
            for index, line in progress:
                self.status.feed_progress(index, line)
            for index, progress_text, rate, slow, why in self._core.take_status():
                self.status.feed_status(index, progress_text, rate, slow, why)
            # A job that restarts: an attempt's exits, then the next attempt's start.
            for attempt, pids in attempts:
                for index, exit_code, signal, stopped, _ in [e for e in exits if e[4] < attempt]:
                    self.status.feed_exit(index, exit_code, signal, stopped)
                exits = [e for e in exits if e[4] >= attempt]
                self.status.feed_attempt(attempt, pids)
            for index, exit_code, signal, stopped, _ in exits:
                self.status.feed_exit(index, exit_code, signal, stopped)
        if streaming:
            self._note_skipped(skipped)  # the oldest lines were dropped: say so before the newer ones
            self._writer.lines(text)
        elif self._view is not None:
            self.status.lines_seen += skipped
            if text:
                lines = text.splitlines()
                self.status.lines_seen += len(lines)
                self._tail.extend(lines)
                self._view.tail = "\n".join(self._tail) + "\n"
        if self._view is not None:
            self.status.metrics.poll()  # at most once a second
            try:
                self._view.refresh()
            except Exception:
                self._view = None

    def _note_skipped(self, skipped, final=False):
        self._skipped += skipped
        now = time.monotonic()
        if self._skipped and (final or now - self._skip_noted >= SKIP_NOTICE_SECONDS):
            self._writer.note(
                "%d line(s) not shown here: more output than the display can take "
                "(at most %d KiB every %.1f s; the newest lines are kept); the log files have every line"
                % (self._skipped, NOTEBOOK_BUDGET_BYTES // 1024, FRAME_SECONDS)
            )
            self._skipped = 0
            self._skip_noted = now

    def _summarize(self, result):
        self.status.metrics.poll(force=True)  # the ranks' last values
        if self.status.outcome is None:
            self.status.finish(result, lambda path: _core.read_log_tail(path, 1, 4096), _core.root_cause)

    def finish(self, result, waited):
        """Shows how the job ended. In a notebook the status view becomes the
        summary; when `waited` (the end of a wait(), in the cell that
        waits), that cell also gets a copy of it if the starting cell is
        another one, and a pointer to the logs. Elsewhere, when `waited`, the
        summary is printed as text (the view's plain-text form). Call from the
        thread that waits or polls."""
        if self.mode == CONSOLE_NONE:
            return
        self._summarize(result)
        if self._view is not None:
            try:
                self._view.refresh(force=True)
            except Exception:
                pass
        if not waited:
            return
        if self._in_kernel:
            if self._view is not None and self._view.starting_cell_done.is_set():
                try:
                    self._view.show_summary()  # the starting cell may be far away
                except Exception:
                    pass
            self._note_skipped(0, final=True)
            ranks = sum(1 for r in result.ranks if r.role == "rank")
            scheduler = " and the scheduler" if ranks < len(result.ranks) else ""
            self._writer.note("logs of all %d rank(s)%s: %s" % (ranks, scheduler, self._core.run_dir))
        else:
            self._note_skipped(0, final=True)
            self._writer.text(self.status.text())
