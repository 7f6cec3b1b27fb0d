"""A page in headless Chromium, driven over the DevTools protocol on a pipe.

Chromium's --remote-debugging-pipe reads commands on its fd 3 and writes
answers and events on its fd 4, each a JSON message ended by a NUL byte: no
websocket, no library. The page's console messages, exceptions and every
network request are collected while it loads, for the tests to check:

    with ChromiumPage(tmp_path) as page:
        page.open(path)                       # waits for the load event
        page.evaluate("document.title")
        page.screenshot(tmp_path / "page.png")
        page.problems()                       # console errors, exceptions

The browser runs in a process group of its own, with a throwaway profile
under tmp_path; close() (the with block's end) ends it by its pid, then its
group, whatever happened.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> Optional[str]:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


class ChromiumError(RuntimeError):
    pass


class ChromiumPage:
    def __init__(self, tmp_path: Path, width: int = 1280, height: int = 900, timeout: float = 60.0) -> None:
        self.tmp_path = Path(tmp_path)
        self.width, self.height, self.timeout = width, height, timeout
        self.console: List[Dict[str, Any]] = []  # {"level", "text"} of console calls and log entries
        self.exceptions: List[str] = []
        self.requests: List[str] = []  # every URL the page asked for
        self._answers: Dict[int, Dict[str, Any]] = {}
        self._events: List[Dict[str, Any]] = []
        self._cond = threading.Condition()
        self._next_id = 0
        self._session: Optional[str] = None
        self._process: Optional[subprocess.Popen] = None
        self._closed_pipe = False

    # -- the browser -------------------------------------------------------

    def __enter__(self) -> "ChromiumPage":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        program = chromium_path()
        if program is None:
            raise ChromiumError("no Chromium in PATH (scripts/setup.sh installs Debian's chromium)")
        profile = self.tmp_path / "chromium-profile"
        profile.mkdir(parents=True, exist_ok=True)
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # Copies above the child's 3 and 4, so that placing them there cannot
        # overwrite one with the other.
        high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
        high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
        os.close(to_browser_r)
        os.close(from_browser_w)

        def place_fds() -> None:  # in the child: its fd 3 reads, its fd 4 writes
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        args = [program, "--headless=new", "--remote-debugging-pipe", "--user-data-dir=" + str(profile),
                "--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size={},{}".format(self.width, self.height), "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        log = open(self.tmp_path / "chromium.log", "wb")
        try:
            self._process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                             pass_fds=(3, 4), preexec_fn=place_fds, start_new_session=True)
        finally:
            log.close()
            os.close(high_r)
            os.close(high_w)
        self._write_fd = to_browser_w
        self._read_fd = from_browser_r
        threading.Thread(target=self._read_loop, daemon=True).start()
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})

    def close(self) -> None:
        process = self._process
        if process is None:
            return
        self._process = None
        try:
            if process.poll() is None and not self._closed_pipe:
                self._session = None
                try:
                    self.call("Browser.close", timeout=5)
                except ChromiumError:
                    pass
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        finally:
            # Its helpers (renderer, GPU, zygote) are in its group: none survives.
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            for fd in (self._write_fd, self._read_fd):
                try:
                    os.close(fd)
                except OSError:
                    pass

    # -- the protocol ------------------------------------------------------

    def _read_loop(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._read_fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._closed_pipe = True
                    self._cond.notify_all()
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                self._dispatch(json.loads(raw.decode("utf-8")))

    def _dispatch(self, message: Dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.console.append({"level": params.get("type"), "text": text})
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self.console.append({"level": entry.get("level"), "text": entry.get("text", "")})
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.exceptions.append(details.get("exception", {}).get("description") or details.get("text", ""))
        elif method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))
        with self._cond:
            if "id" in message:
                self._answers[message["id"]] = message
            elif method:
                self._events.append(message)
            self._cond.notify_all()

    def call(self, method: str, params: Optional[Dict[str, Any]] = None, timeout: Optional[float] = None) -> Any:
        with self._cond:
            self._next_id += 1
            ident = self._next_id
        message: Dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if self._session and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self._session
        data = json.dumps(message).encode("utf-8") + b"\0"
        try:
            while data:
                data = data[os.write(self._write_fd, data):]
        except OSError as e:
            raise ChromiumError("{}: the browser's pipe is closed ({})".format(method, e)) from e
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while ident not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed_pipe:
                    raise ChromiumError("{}: no answer from the browser{}".format(
                        method, " (it exited)" if self._closed_pipe else " in time"))
                self._cond.wait(left)
            answer = self._answers.pop(ident)
        if "error" in answer:
            raise ChromiumError("{}: {}".format(method, answer["error"]))
        return answer.get("result", {})

    def wait_event(self, method: str, timeout: Optional[float] = None) -> Dict[str, Any]:
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while True:
                for i, event in enumerate(self._events):
                    if event.get("method") == method:
                        return self._events.pop(i).get("params", {})
                left = deadline - time.monotonic()
                if left <= 0 or self._closed_pipe:
                    raise ChromiumError("no {} from the browser".format(method))
                self._cond.wait(left)

    # -- the page ------------------------------------------------------------

    def open(self, path: Path) -> str:
        """Loads a file and waits for its load event; returns its URL."""
        url = Path(path).resolve().as_uri()
        with self._cond:
            self._events = [e for e in self._events if e.get("method") != "Page.loadEventFired"]
        answer = self.call("Page.navigate", {"url": url})
        if answer.get("errorText"):
            raise ChromiumError("cannot open {}: {}".format(url, answer["errorText"]))
        self.wait_event("Page.loadEventFired")
        return url

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-able)."""
        answer = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in answer:
            details = answer["exceptionDetails"]
            raise ChromiumError("{}: {}".format(expression, details.get("exception", {}).get("description", details)))
        return answer.get("result", {}).get("value")

    def screenshot(self, path: Path) -> Path:
        """The whole page as a PNG."""
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def problems(self) -> List[str]:
        """Console errors and warnings, and uncaught exceptions, so far."""
        bad = ("error", "warning", "assert")
        found = ["{}: {}".format(c["level"], c["text"]) for c in self.console if c["level"] in bad]
        return found + ["exception: " + e for e in self.exceptions]

    def foreign_requests(self, own_url: str) -> List[str]:
        """Requests for anything but the page itself."""
        return [u for u in self.requests if u != own_url]
