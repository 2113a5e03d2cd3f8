"""A real headless Chromium (Debian's ``chromium``; ``.ci/run`` installs it) driven over the
DevTools protocol, for the tests that walk the UI as a person would: type into the login
form, click links, read the page, take screenshots. Started and stopped by PID, its profile
in a temporary folder, listening on 127.0.0.1 only."""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from websockets.sync.client import connect


def chromium_or_skip() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: `.ci/run` installs Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


class Browser:
    """One page of a headless Chromium. ``with Browser() as browser: browser.goto(url)``."""

    def __init__(self, width: int = 1400, height: int = 900):
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        self.log = Path(self.profile) / "chromium.log"
        self.process = subprocess.Popen(
            [
                chromium_or_skip(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--window-size={width},{height}",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(log_handle := self.log.open("w")),
        )
        log_handle.close()  # the child holds its own descriptor
        self.ids = itertools.count(1)
        try:
            self.socket = connect(self._page_socket(), max_size=64 * 1024 * 1024, open_timeout=30)
            self.send("Page.enable")
            self.send("Runtime.enable")
        except BaseException:
            self.close()
            raise

    def _page_socket(self) -> str:
        deadline = time.time() + 60
        while True:
            found = re.search(
                r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", self.log.read_text()
            )
            if found:
                port = int(found.group(1))
                break
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError(
                    f"chromium did not start (exit {self.process.poll()}): "
                    f"{self.log.read_text()[-1000:]}"
                )
            time.sleep(0.1)
        targets = json.load(
            urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10)
        )
        return next(
            target["webSocketDebuggerUrl"] for target in targets if target["type"] == "page"
        )

    def send(self, method: str, timeout: float = 60, **params) -> dict:
        """A DevTools command's result (events that arrive meanwhile are dropped)."""
        message_id = next(self.ids)
        self.socket.send(json.dumps({"id": message_id, "method": method, "params": params}))
        deadline = time.time() + timeout
        while True:
            reply = json.loads(self.socket.recv(timeout=max(deadline - time.time(), 0.1)))
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def eval(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60, what: str = "") -> object:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.time() + timeout
        while True:
            try:
                value = self.eval(expression)
            except RuntimeError:  # the page is navigating
                value = None
            if value:
                return value
            if time.time() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what or expression} on {self.url()}: "
                    f"{self.text()[:1500]}"
                )
            time.sleep(0.25)

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for(
            "document.readyState === 'complete' && location.href !== 'about:blank'", what="the page"
        )

    def url(self) -> str:
        try:
            return self.eval("location.href")
        except RuntimeError:
            return "?"

    def text(self, selector: str = "body") -> str:
        try:
            return self.eval(
                f"(document.querySelector({json.dumps(selector)}) || {{}}).innerText || ''"
            )
        except RuntimeError:
            return ""

    def type_into(self, selector: str, text: str) -> None:
        """Focus the element and type as a keyboard would (what React-driven forms listen to)."""
        self.wait_for(f"!!document.querySelector({json.dumps(selector)})", what=selector)
        self.eval(f"document.querySelector({json.dumps(selector)}).focus()")
        self.send("Input.insertText", text=text)

    def click(self, selector: str) -> None:
        self.wait_for(f"!!document.querySelector({json.dumps(selector)})", what=selector)
        self.eval(f"document.querySelector({json.dumps(selector)}).click()")

    def set_width(self, width: int, height: int = 900) -> None:
        """Lay the page out at ``width`` CSS pixels (a narrow window, a phone)."""
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def overflow_px(self) -> int:
        """How far the page's content reaches past the window's width (0: no sideways scrolling)."""
        return int(
            self.eval("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        )

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        if getattr(self, "socket", None) is not None:
            self.socket.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()
