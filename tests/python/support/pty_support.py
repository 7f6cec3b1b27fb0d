"""Running a program on a real pseudo-terminal, for the tests of what a
terminal shows (status line, notices after Ctrl-C).

    with PtyProcess(argv, cwd=tmp_path, columns=80) as proc:
        proc.read_until(b"ready")      # the bytes so far (raises on timeout); or a regex
        proc.interrupt()               # Ctrl-C, as the terminal sends it
        code = proc.wait()             # the rest is in proc.output
"""

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time


class PtyProcess:
    """`argv` with a new pty as its controlling terminal, stdin, stdout and
    stderr, `columns` x `rows` large. Leaving the `with` block kills the
    process if it still runs and closes the pty."""

    def __init__(self, argv, cwd, columns=80, rows=24, env=None):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self._master = master
        self.output = b""

        def controlling_terminal():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        try:
            self.process = subprocess.Popen(argv, cwd=str(cwd), env=env, stdin=slave, stdout=slave, stderr=slave,
                                            preexec_fn=controlling_terminal)
        finally:
            os.close(slave)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self._master)

    def _read(self, timeout):
        ready, _, _ = select.select([self._master], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self._master, 65536)
        except OSError:  # EIO: every process holding the terminal has closed it
            data = b""
        self.output += data
        return bool(data)

    def read_until(self, needle, timeout=30.0, after=None):
        """Reads until `needle` (bytes, or a compiled bytes regex) shows in
        the output from offset `after` on (default: what had been read when
        called); returns the whole output. AssertionError on timeout."""
        start = len(self.output) if after is None else after

        def found():
            if isinstance(needle, bytes):
                return needle in self.output[start:]
            return needle.search(self.output, start) is not None

        deadline = time.monotonic() + timeout
        while not found():
            left = deadline - time.monotonic()
            assert left > 0, "%r not shown within %.0f s; the terminal shows:\n%s" % (
                needle, timeout, self.output.decode("utf-8", "replace"))
            if not self._read(min(left, 0.5)) and self.process.poll() is not None:
                self._read(0)
                assert found(), "the program ended without showing %r:\n%s" % (
                    needle, self.output.decode("utf-8", "replace"))
        return self.output

    def interrupt(self):
        """Ctrl-C: SIGINT to the terminal's foreground process group."""
        os.killpg(os.getpgid(self.process.pid), signal.SIGINT)

    def wait(self, timeout=60.0):
        """Reads everything until the program exits; returns its exit status."""
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            assert time.monotonic() < deadline, "still running after %.0f s:\n%s" % (
                timeout, self.output.decode("utf-8", "replace"))
            self._read(0.1)
        while self._read(0.05):
            pass
        return self.process.returncode


def run_on_pty(argv, cwd, columns=80, rows=24, env=None, timeout=60.0):
    """(exit status, every byte shown) of `argv` run to its end on a pty."""
    with PtyProcess(argv, cwd, columns, rows, env) as proc:
        code = proc.wait(timeout)
        return code, proc.output
