"""A real headless Chromium (Debian's ``chromium``) driven over the DevTools protocol, for UI tests.

Only what the tests need: set a cookie, open a page, evaluate an expression, save a screenshot.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
from itertools import count
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

from tests.polling import wait_until


class HeadlessChromium:
    """One browser process with one page; use as a context manager."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="airmirror-chromium-"))
        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        if binary is None:
            raise RuntimeError("Debian's chromium package is not installed (.ci/run installs it)")
        self.process = subprocess.Popen(
            [
                binary,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = self.profile / "DevToolsActivePort"
        # chromium creates the file before it writes the port into it
        wait_until(lambda: port_file.exists() and port_file.read_text().strip(), 60, "chromium's DevTools port")
        port = int(port_file.read_text().split()[0])
        pages = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
        page = next(p for p in pages if p["type"] == "page")
        # legacy=True: websockets' way to hold a connection for the browser's life (closed by __exit__), not a `with`
        self.socket = connect(page["webSocketDebuggerUrl"], max_size=None, legacy=True)
        self.ids = count(1)

    def __enter__(self) -> HeadlessChromium:
        return self

    def __exit__(self, *_: object) -> None:
        self.socket.close()
        self.process.kill()
        self.process.wait(30)
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command; its result (events in between are skipped)."""
        command_id = next(self.ids)
        self.socket.send(json.dumps({"id": command_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("id") == command_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def set_cookie(self, url: str, name: str, value: str) -> None:
        self.call("Network.enable")
        assert self.call("Network.setCookie", url=url, name=name, value=value, path="/").get("success")

    def open(self, url: str, ready: str, timeout: float = 60) -> None:
        """Navigate to ``url`` and wait until the JavaScript expression ``ready`` is true."""
        self.call("Page.enable")
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while not self.evaluate(ready):
            if time.monotonic() > deadline:
                text = self.evaluate("document.body && document.body.innerText")
                raise AssertionError(f"{url}: '{ready}' never became true; page text: {text!r}")
            time.sleep(0.5)

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(
            base64.b64decode(self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"])
        )
        return path
