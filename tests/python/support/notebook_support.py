"""Running real notebooks in real Jupyter kernels, for the tests.

The kernels come from scripts/notebook_env.sh: one venv per ipykernel major
version (6 and 7), each with this tree's davincirunsdk wheel and its own
kernelspec under build/notebook-env/kernels. The notebooks are run here, in
the test process, by nbclient.

    nb = execute_notebook(["import sys", "print(sys.executable)"], kernel_name)
    cell_text(nb.cells[1])                  # the cell's streams and text/plain results
    cell_errors(nb.cells[1])                # [(ename, evalue, traceback text)]

    messages = []
    execute_notebook(sources, kernel_name, iopub=messages, linger=1.0)
    iopub_stats(messages, cell_index=1)     # count, bytes, rates of its stream messages

Tests take the `kernel_name` fixture (conftest.py), which runs them once per
kernel and skips when scripts/notebook_env.sh has not been run.
"""

import asyncio
import dataclasses
import datetime
import functools
import hashlib
import json
import os
import re
import subprocess
import time
from queue import Empty
from typing import Any, Dict, List, Optional

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SETUP_SCRIPT = "scripts/notebook_env.sh"
ENV_DIR = os.environ.get("DAVINCIRUN_NOTEBOOK_ENV") or os.path.join(REPO, "build", "notebook-env")
# What JUPYTER_PATH would name; the kernels are looked up only here (never
# the machine's own kernelspecs, so a missing one cannot be replaced silently).
JUPYTER_DATA_DIR = os.path.join(ENV_DIR, "kernels", "share", "jupyter")
KERNELS_DIR = os.path.join(JUPYTER_DATA_DIR, "kernels")
KERNEL_NAMES = ("davincirun-ipykernel6", "davincirun-ipykernel7")

# The first cell of the tests' notebooks.
IMPORTS = "import os, sys, time\nfrom davincirunsdk import start_and_wait_distributed_train, start_distributed_train"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text):
    return _ANSI.sub("", text)


# ---------------------------------------------------------------- kernels


def kernel_spec_path(kernel_name):
    return os.path.join(KERNELS_DIR, kernel_name, "kernel.json")


def kernel_python(kernel_name):
    """The interpreter a kernelspec starts (its venv's python)."""
    with open(kernel_spec_path(kernel_name)) as f:
        return json.load(f)["argv"][0]


def kernel_problem(kernel_name):
    """None when the kernel can be started, else why not (a skip reason)."""
    path = kernel_spec_path(kernel_name)
    if not os.path.isfile(path):
        return "kernelspec %s not installed (%s missing): run bash %s" % (kernel_name, path, SETUP_SCRIPT)
    try:
        python = kernel_python(kernel_name)
    except (OSError, ValueError, KeyError, IndexError) as e:
        return "kernelspec %s is unreadable (%s): run bash %s" % (kernel_name, e, SETUP_SCRIPT)
    if not os.access(python, os.X_OK):
        return "kernelspec %s: its interpreter %s is missing: run bash %s" % (kernel_name, python, SETUP_SCRIPT)
    return None


@functools.lru_cache(maxsize=None)
def _source_digest():
    return subprocess.run(
        ["bash", os.path.join(REPO, SETUP_SCRIPT), "--digest"], check=True, stdout=subprocess.PIPE, text=True
    ).stdout.strip()


def built_wheel():
    """(path, None): the davincirunsdk wheel scripts/notebook_env.sh built
    from the current sources; (None, why not) when there is none."""
    wheel_dir = os.path.join(ENV_DIR, "wheel")
    try:
        with open(os.path.join(wheel_dir, "SOURCE_DIGEST")) as f:
            built_from = f.read().strip()
        wheels = [name for name in os.listdir(wheel_dir) if name.endswith(".whl")]
    except OSError:
        return None, "no wheel in %s: run bash %s" % (wheel_dir, SETUP_SCRIPT)
    if built_from != _source_digest() or len(wheels) != 1:
        return None, "the wheel in %s is not the current sources': run bash %s" % (wheel_dir, SETUP_SCRIPT)
    return os.path.join(wheel_dir, wheels[0]), None


@functools.lru_cache(maxsize=None)
def stale_reason(kernel_name):
    """None when the kernel's venv holds the wheel built from the current
    sources, else what is out of date. The kernels import the davincirunsdk
    installed in their venv, not this tree: no test may pass against an old
    build."""
    wheel_dir = os.path.join(ENV_DIR, "wheel")
    with open(os.path.join(wheel_dir, "SOURCE_DIGEST")) as f:
        built_from = f.read().strip()
    if built_from != _source_digest():
        return "the davincirunsdk wheel in %s is older than the sources" % wheel_dir
    [wheel] = [name for name in os.listdir(wheel_dir) if name.endswith(".whl")]
    with open(os.path.join(wheel_dir, wheel), "rb") as f:
        wheel_sha = hashlib.sha256(f.read()).hexdigest()
    venv = os.path.dirname(os.path.dirname(kernel_python(kernel_name)))
    with open(os.path.join(venv, ".davincirunsdk-wheel")) as f:
        if f.read().strip() != wheel_sha:
            return "%s does not hold the current wheel %s" % (venv, wheel)
    return None


def checked_kernel(name):
    """`name` (a kernelspec) for the `kernel_name` fixture (conftest.py).
    Skips when it is not installed; fails when its davincirunsdk is older
    than the sources."""
    reason = kernel_problem(name)
    if reason:
        pytest.skip(reason)
    try:
        stale = stale_reason(name)
    except (OSError, ValueError, subprocess.CalledProcessError) as e:
        stale = "cannot tell whether %s is up to date: %s" % (ENV_DIR, e)
    if stale:
        pytest.fail("%s: run bash %s" % (stale, SETUP_SCRIPT), pytrace=False)
    return name


# ---------------------------------------------------------------- notebooks


def launch_call(function, code, table, log_dir, env, **kwargs):
    """Source of a call `function([sys.executable, '-c', code], ...)` for a
    cell; every value goes in through repr()."""
    extra = "".join(", %s=%r" % item for item in sorted(kwargs.items()))
    return "%s([sys.executable, '-c', %r], rank_table=%r, log_dir=%r, env=%r%s)" % (
        function, code, table, log_dir, env, extra)


def new_notebook(sources, kernel_name=None):
    """An nbformat v4 notebook with one code cell per source string."""
    import nbformat
    from nbformat.v4 import new_code_cell
    from nbformat.v4 import new_notebook as make

    nb = make(cells=[new_code_cell(source) for source in sources])
    if kernel_name:
        nb.metadata["kernelspec"] = {"name": kernel_name, "display_name": kernel_name, "language": "python"}
    nbformat.validate(nb)
    return nb


@dataclasses.dataclass
class IOPubMessage:
    """One IOPub message as the runner read it."""

    received: float  # time.monotonic() when nbclient read it (it reads as they come while a cell runs)
    received_wall: float  # time.time() at the same moment
    sent: Optional[datetime.datetime]  # the kernel's header date (tz-aware)
    msg_type: str  # stream, status, execute_input, execute_result, error, display_data...
    msg_id: str
    parent_id: Optional[str]  # msg_id of the execute_request it answers
    wire_bytes: int  # size of all its ZMQ frames (header, parent header, metadata, content, signature)
    content_bytes: int  # size of its JSON content
    content: Dict[str, Any]
    cell_index: Optional[int] = None  # the cell whose execute_request is the parent; None: not a cell's
    delivered: bool = False  # nbclient put it into that cell (else it arrived after the cell ended: dropped)

    @property
    def text(self):
        return self.content.get("text", "") if self.msg_type == "stream" else ""

    @property
    def latency(self):
        """Seconds from the kernel's send time to the runner's read."""
        return self.received_wall - self.sent.timestamp() if self.sent else None


def iopub_stats(messages, cell_index=None, msg_type="stream"):
    """Count, bytes and rates of `messages` of one type (optionally of one
    cell): dict with count, wire_bytes, text_bytes, span (s between the first
    and last), messages_per_s, bytes_per_s (wire)."""
    chosen = [m for m in messages if m.msg_type == msg_type and (cell_index is None or m.cell_index == cell_index)]
    wire = sum(m.wire_bytes for m in chosen)
    span = chosen[-1].received - chosen[0].received if len(chosen) > 1 else 0.0
    return {
        "count": len(chosen),
        "wire_bytes": wire,
        "text_bytes": sum(len(m.text.encode()) for m in chosen),
        "span": span,
        "messages_per_s": (len(chosen) - 1) / span if span > 0 else None,
        "bytes_per_s": wire / span if span > 0 else None,
    }


def _notebook_client_class():
    from nbclient import NotebookClient
    from nbclient.util import ensure_async

    class RecordingNotebookClient(NotebookClient):
        """NotebookClient that finds kernels only in KERNELS_DIR, records every
        IOPub message it reads (`self.iopub`), and can keep reading for
        `linger` seconds after the last cell."""

        def __init__(self, nb, linger=0.0, **kw):
            super().__init__(nb, **kw)
            self.iopub: List[IOPubMessage] = []
            self.linger = linger
            self._by_id: Dict[str, IOPubMessage] = {}
            self._cell_of_request: Dict[str, int] = {}

        def create_kernel_manager(self):
            from jupyter_client.kernelspec import KernelSpecManager

            self.km = self.kernel_manager_class(
                kernel_name=self.kernel_name,
                kernel_spec_manager=KernelSpecManager(kernel_dirs=[KERNELS_DIR]),
                config=self.config,
            )
            return self.km

        async def async_start_new_kernel_client(self):
            kc = await super().async_start_new_kernel_client()
            self._instrument(kc.iopub_channel)
            return kc

        def _instrument(self, channel):
            record = self._record
            if hasattr(channel, "_recv") and hasattr(channel, "socket"):
                # jupyter_client 7/8's AsyncZMQSocketChannel: see the frames.
                async def _recv(**kwargs):
                    frames = await channel.socket.recv_multipart(**kwargs)
                    _, signed = channel.session.feed_identities(frames)
                    msg = channel.session.deserialize(signed)
                    record(msg, sum(len(frame) for frame in frames))
                    return msg

                channel._recv = _recv
            else:  # elsewhere: estimate the size from the JSON
                get_msg = channel.get_msg

                async def get_msg_recorded(*args, **kwargs):
                    msg = await ensure_async(get_msg(*args, **kwargs))
                    record(msg, None)
                    return msg

                channel.get_msg = get_msg_recorded

        def _record(self, msg, wire_bytes):
            now, wall = time.monotonic(), time.time()
            content_bytes = len(json.dumps(msg.get("content", {}), default=str).encode())
            header = msg.get("header", {})
            sent = header.get("date")
            entry = IOPubMessage(
                received=now,
                received_wall=wall,
                sent=sent if isinstance(sent, datetime.datetime) else None,
                msg_type=msg.get("msg_type") or header.get("msg_type", ""),
                msg_id=header.get("msg_id", ""),
                parent_id=(msg.get("parent_header") or {}).get("msg_id"),
                wire_bytes=wire_bytes if wire_bytes is not None else content_bytes,
                content_bytes=content_bytes,
                content=msg.get("content", {}),
            )
            self.iopub.append(entry)
            self._by_id[entry.msg_id] = entry

        async def _async_poll_output_msg(self, parent_msg_id, cell, cell_index):
            self._cell_of_request[parent_msg_id] = cell_index
            return await super()._async_poll_output_msg(parent_msg_id, cell, cell_index)

        def process_message(self, msg, cell, cell_index):
            entry = self._by_id.get(msg.get("header", {}).get("msg_id"))
            if entry is not None:
                entry.delivered = True
            return super().process_message(msg, cell, cell_index)

        async def async_execute_cell(self, cell, cell_index, *args, **kwargs):
            result = await super().async_execute_cell(cell, cell_index, *args, **kwargs)
            if self.linger > 0 and cell_index == len(self.nb.cells) - 1:
                await self._drain(self.linger)
            return result

        async def _drain(self, seconds):
            """Reads (and records) IOPub messages for `seconds` more."""
            deadline = time.monotonic() + seconds
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                try:
                    await ensure_async(self.kc.iopub_channel.get_msg(timeout=left))
                except (Empty, asyncio.TimeoutError):
                    return

        def finish_records(self):
            for entry in self.iopub:
                entry.cell_index = self._cell_of_request.get(entry.parent_id)

    return RecordingNotebookClient


def execute_notebook(
    notebook,
    kernel_name,
    *,
    timeout=60,
    startup_timeout=60,
    allow_errors=False,
    cwd=None,
    env=None,
    iopub=None,
    linger=0.0,
):
    """Runs every cell of `notebook` (a NotebookNode, or a list of cell
    sources) in a new kernel `kernel_name` from build/notebook-env/kernels,
    then shuts the kernel down. Returns the executed notebook.

    timeout: seconds each cell may take (nbclient's CellTimeoutError beyond).
    allow_errors: go on after a cell raised (its error is in its outputs);
        else nbclient raises CellExecutionError at the first one.
    cwd: the kernel's working directory. env: extra variables for the kernel.
    iopub: a list that receives an IOPubMessage for every IOPub message read
        (the kernel's start-up chatter before the first cell excluded).
    linger: seconds to keep reading IOPub after the last cell, to catch
        output that comes late (e.g. from a thread a cell started).
    """
    if not isinstance(notebook, dict):
        notebook = new_notebook(list(notebook), kernel_name)
    kernel_env = dict(os.environ)
    # The user's IPython profile (startup files, config) stays out of it.
    kernel_env.setdefault("IPYTHONDIR", os.path.join(ENV_DIR, "ipython"))
    kernel_env.update(env or {})
    client = _notebook_client_class()(
        notebook,
        linger=linger,
        kernel_name=kernel_name,
        timeout=timeout,
        startup_timeout=startup_timeout,
        allow_errors=allow_errors,
        # nbclient's default 4 s is generous; a long cell's output must not be cut.
        iopub_timeout=10,
    )
    try:
        kwargs = {"env": kernel_env}
        if cwd is not None:
            kwargs["cwd"] = os.fspath(cwd)
        return client.execute(**kwargs)
    finally:
        client.finish_records()
        if iopub is not None:
            iopub.extend(client.iopub)


# ---------------------------------------------------------------- outputs


def cell_text(cell, streams=("stdout", "stderr"), displays=True, ansi=True):
    """The cell's stream output (those named in `streams`) and text/plain
    results and (if `displays`) displays, concatenated in output order;
    without colour codes unless `ansi`."""
    parts = []
    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "stream" and output.get("name") in streams:
            parts.append(output.get("text", "") if ansi else strip_ansi(output.get("text", "")))
        elif kind == "execute_result" or (kind == "display_data" and displays):
            text = output.get("data", {}).get("text/plain")
            if text is not None:
                parts.append(text if text.endswith("\n") else text + "\n")
    return "".join(parts)


def cell_displays(cell):
    """[{mime type: data}] of the cell's display_data outputs, as they stand
    after every update_display_data nbclient applied (it applies them by
    display id, to any cell, while a cell runs)."""
    return [dict(output.get("data", {})) for output in cell.get("outputs", [])
            if output.get("output_type") == "display_data"]


def cell_errors(cell):
    """[(ename, evalue, traceback text without colour codes)], one per error
    output of the cell (an empty list when it raised nothing)."""
    return [
        (output.get("ename"), output.get("evalue"), strip_ansi("\n".join(output.get("traceback", []))))
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
