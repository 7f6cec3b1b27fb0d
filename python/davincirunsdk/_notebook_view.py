"""The job's status view in a Jupyter notebook: one display output in the
cell that started the job, updated in place through its display id.

Why a display id: a Jupyter front end (and nbclient) applies an
``update_display_data`` message to every output with that id, whichever cell
is running when it is sent (Jupyter messaging protocol 5.1+, ``transient.display_id``).
Stream output, in contrast, belongs to the cell whose request is its parent,
and is dropped by front ends once that cell has finished.
"""

import threading
import time


class NotebookView:
    """Displays `status` (a JobStatus) now, in the running cell, and keeps it current.

    Must be created on the kernel's main thread, while the starting cell
    runs. Raises whatever IPython's display raises; callers treat any failure
    as "no view".
    """

    # Seconds between two updates of the view (at most 2 per second: a few KB each).
    REFRESH_SECONDS = 0.5

    def __init__(self, status):
        from IPython import get_ipython
        from IPython.display import display

        self._status = status
        self.tail = ""  # recent output lines shown under the table (text)
        self._display = display
        self._handle = display(self._bundle(), raw=True, display_id=True)
        self._updated = time.monotonic()
        # Set once the starting cell has finished: output shown after that
        # must go into this view, never into whichever cell runs then.
        self.starting_cell_done = threading.Event()
        self._shell = get_ipython()
        self._shell.events.register("post_execute", self._on_post_execute)

    def _on_post_execute(self):
        self.starting_cell_done.set()
        self.close()

    def _bundle(self):
        return {"text/plain": self._status.text(tail=self.tail), "text/html": self._status.html(tail=self.tail)}

    def refresh(self, force=False):
        """Updates the view if REFRESH_SECONDS have passed (or `force`)."""
        now = time.monotonic()
        if not force and now - self._updated < self.REFRESH_SECONDS:
            return
        self._updated = now
        self._handle.update(self._bundle(), raw=True)

    def show_summary(self):
        """Displays the current state as a new output of the running cell."""
        self._display(self._bundle(), raw=True)

    def close(self):
        """Stops watching the kernel's cells (idempotent; main thread only)."""
        try:
            self._shell.events.unregister("post_execute", self._on_post_execute)
        except ValueError:  # already done
            pass
