"""A Jupyter kernel driven by hand, for the tests that interrupt, restart or
kill it while a job runs (test_notebook_lifecycle.py): the kernels are those
of notebook_support.py."""

import contextlib
import os
import time
from queue import Empty
from typing import Any, Dict, List, Optional

from notebook_support import ENV_DIR, KERNELS_DIR, strip_ansi

# ---------------------------------------------------------------- a kernel driven by hand
#
# nbclient runs each cell to its end, so it cannot act while a cell runs. For
# that (interrupting a cell, killing or restarting the kernel under a running
# job), tests drive a kernel themselves:
#
#     with running_kernel(kernel_name, cwd=tmp_path, env=extra) as (km, kc):
#         cell = Execution(kc, "import time; time.sleep(60)")   # sent, not waited for
#         ...                                                   # meanwhile: km.interrupt_kernel()
#         reply = cell.wait(timeout=10)                         # the execute_reply's content
#         reply["status"], reply.get("ename"), cell.text()
#         kernel_pid(km)                                        # the kernel process


@contextlib.contextmanager
def running_kernel(kernel_name, cwd=None, env=None, startup_timeout=60):
    """Starts kernel `kernel_name`, found only in KERNELS_DIR (as
    execute_notebook's client finds it), and yields (km, kc): its
    jupyter_client KernelManager and a started, ready blocking client.

    The kernel gets this process's environment (os.environ as it is now, so
    e.g. a DAVINCIRUN_LOCK_DIR a fixture set), IPYTHONDIR as execute_notebook
    gives it, then `env` on top; its working directory is `cwd`.

    Afterwards, whatever happened (the kernel killed or restarted by the
    test included), the client's channels are stopped and the kernel (the
    current one) is shut down at once and its connection file removed.
    """
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    kernel_env = dict(os.environ)
    kernel_env.setdefault("IPYTHONDIR", os.path.join(ENV_DIR, "ipython"))
    kernel_env.update(env or {})
    km = KernelManager(kernel_name=kernel_name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[KERNELS_DIR]))
    kwargs = {"env": kernel_env}
    if cwd is not None:
        kwargs["cwd"] = os.fspath(cwd)
    km.start_kernel(**kwargs)
    kc = None
    try:
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=startup_timeout)
        yield km, kc
    finally:
        if kc is not None:
            kc.stop_channels()
        if km.has_kernel:  # also after the process died: this reaps it and removes its files
            km.shutdown_kernel(now=True)


def kernel_pid(km):
    """The pid of the kernel process `km` started (its current one)."""
    return km.provisioner.pid


class Execution:
    """One cell sent to a kernel (an execute_request) without waiting for it.

    Reads IOPub only when asked (read, wait_for_text, wait), keeping the
    messages that answer this request: `outputs` holds the content of each
    stream, error, execute_result, display_data and update_display_data
    message, in order, with its type as "output_type". The kernel must run
    one Execution at a time (IOPub messages of other requests are read and
    dropped).
    """

    OUTPUT_TYPES = ("stream", "error", "execute_result", "display_data", "update_display_data")

    def __init__(self, kc, code):
        self.kc = kc
        self.code = code
        self.msg_id = kc.execute(code)
        self.outputs: List[Dict[str, Any]] = []
        self.idle = False  # the kernel's status went idle after this request
        self.reply: Optional[Dict[str, Any]] = None  # the execute_reply's content

    def read(self, timeout):
        """Reads this request's IOPub messages for up to `timeout` seconds,
        returning early once the kernel went idle after it. True when idle."""
        deadline = time.monotonic() + timeout
        while not self.idle:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                msg = self.kc.get_iopub_msg(timeout=left)
            except Empty:
                break
            if (msg.get("parent_header") or {}).get("msg_id") != self.msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if kind in self.OUTPUT_TYPES:
                self.outputs.append(dict(msg["content"], output_type=kind))
            elif kind == "status" and msg["content"].get("execution_state") == "idle":
                self.idle = True
        return self.idle

    def text(self, displays=False):
        """This cell's stream text so far, stdout and stderr as they came;
        with `displays`, also the text/plain of its results and displays
        (every version of an updated one), without colour codes."""
        parts = []
        for output in self.outputs:
            if output["output_type"] == "stream":
                parts.append(output.get("text", ""))
            elif displays and output["output_type"] != "error":
                parts.append(output.get("data", {}).get("text/plain", "") + "\n")
        return strip_ansi("".join(parts)) if displays else "".join(parts)

    def errors(self):
        """[(ename, evalue)] of its error outputs so far."""
        return [(o.get("ename"), o.get("evalue")) for o in self.outputs if o["output_type"] == "error"]

    def wait_for_text(self, needle, timeout):
        """Reads until `needle` is in text(displays=True); False when the time
        ran out or the cell ended without it."""
        deadline = time.monotonic() + timeout
        while needle not in self.text(displays=True):
            left = deadline - time.monotonic()
            if left <= 0 or self.idle:
                return False
            self.read(min(left, 0.1))
        return True

    def wait(self, timeout):
        """Waits for the cell's end: its execute_reply (returned, its content:
        status "ok" or "error" with ename, evalue, traceback) and every output
        up to the kernel going idle. Raises TimeoutError beyond `timeout`."""
        deadline = time.monotonic() + timeout
        while self.reply is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no execute_reply within %s s for cell %r" % (timeout, self.code))
            try:
                msg = self.kc.get_shell_msg(timeout=left)
            except Empty:
                continue
            if (msg.get("parent_header") or {}).get("msg_id") == self.msg_id:
                self.reply = msg["content"]
        if not self.read(max(deadline - time.monotonic(), 1.0)):
            raise TimeoutError("the kernel did not go idle within %s s after cell %r" % (timeout, self.code))
        return self.reply


def run_cell(kc, code, timeout=30):
    """Runs `code` in the kernel to its end: (execute_reply content, Execution)."""
    cell = Execution(kc, code)
    return cell.wait(timeout), cell
