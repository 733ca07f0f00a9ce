"""Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe).

Standard library only: Chromium reads commands on its fd 3 and writes replies and events on its
fd 4, each message a JSON object followed by a NUL byte. No websocket client, no chromedriver.
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time

from browser_waiting import Waiting


class Browser(Waiting):
    def __init__(self, chromium="chromium", width=1280, height=900):
        self.profile = tempfile.mkdtemp(prefix="gattway-chromium-")
        reply_r, reply_w = os.pipe()  # Chromium writes (its fd 4), we read
        cmd_r, cmd_w = os.pipe()  # we write, Chromium reads (its fd 3)

        def child_fds():
            a, b = os.dup(cmd_r), os.dup(reply_w)
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self.process = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-pipe",
                f"--window-size={width},{height}",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            close_fds=False,
            preexec_fn=child_fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(cmd_r)
        os.close(reply_w)
        self.reader, self.writer = reply_r, cmd_w
        self.buffer = b""
        self.next_id = 0
        self.events = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)

    def call(self, method, params=None, session=False, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self.writer, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" not in self.buffer:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{method}: no answer in {timeout} s")
                chunk = os.read(self.reader, 1 << 16)
                if not chunk:
                    raise RuntimeError("Chromium closed its pipe")
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def headers(self, headers):
        self.call("Network.enable", session=True)
        self.call("Network.setExtraHTTPHeaders", {"headers": headers}, session=True)

    def goto(self, url):
        result = self.call("Page.navigate", {"url": url}, session=True)
        if result.get("errorText"):
            raise RuntimeError(f"{url}: {result['errorText']}")

    def evaluate(self, expression):
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=True,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(data))

    def version(self):
        """The browser's product and version, e.g. "HeadlessChrome/156.0.8078.129"."""
        return self.call("Browser.getVersion")["product"]

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.reader)
        os.close(self.writer)
        shutil.rmtree(self.profile, ignore_errors=True)
