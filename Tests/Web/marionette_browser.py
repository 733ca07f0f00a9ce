"""Headless Firefox driven over Marionette, its own remote protocol (firefox-esr --marionette).

Standard library only, and no geckodriver: Firefox listens on a loopback TCP port and speaks
length-prefixed JSON, each message `LENGTH:JSON` with LENGTH the JSON's size in bytes. On connect
it sends a handshake object ({"applicationType": "gecko", "marionetteProtocol": 3}); then each
command is `[0, id, name, parameters]` and its answer `[1, id, error, result]`, error null or an
object with "error" and "message". The port: the profile's user.js asks for port 0 (any free
one) and Firefox writes the one it bound into the profile's MarionetteActivePort file.

The same interface as cdp_browser.Browser for what page_test.py uses: goto, evaluate (an
expression; a promise is awaited, as WebDriver's Execute Script does), wait_for, screenshot, close.
"""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from browser_waiting import Waiting

# A fresh profile that neither phones home nor shows first-run pages. Marionette itself applies
# its recommended automation preferences on top (remote.prefs.recommended).
USER_JS = """\
user_pref("marionette.port", 0);
user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("browser.startup.page", 0);
user_pref("browser.startup.homepage_override.mstone", "ignore");
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);
user_pref("app.update.disabledForTesting", true);
user_pref("network.captive-portal-service.enabled", false);
user_pref("network.connectivity-service.enabled", false);
"""


class Browser(Waiting):
    def __init__(self, firefox="firefox-esr", width=1280, height=900, profile_parent=None):
        if profile_parent:
            os.makedirs(profile_parent, exist_ok=True)
        self.profile = tempfile.mkdtemp(prefix="gattway-firefox-", dir=profile_parent)
        with open(os.path.join(self.profile, "user.js"), "w", encoding="utf-8") as file:
            file.write(USER_JS)
        self.log_path = os.path.join(self.profile, "firefox.log")
        environment = dict(os.environ, MOZ_HEADLESS="1", MOZ_HEADLESS_WIDTH=str(width), MOZ_HEADLESS_HEIGHT=str(height))
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [firefox, "--headless", "--marionette", "--no-remote", "--profile", self.profile, "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                start_new_session=True,
            )
        self.sock = None
        self.buffer = b""
        self.next_id = 0
        try:
            self.sock = self._connect(timeout=90)
            handshake = self._receive(timeout=30)
            if handshake.get("marionetteProtocol") != 3:
                raise RuntimeError(f"Marionette handshake: {handshake}")
            capabilities = {"alwaysMatch": {"pageLoadStrategy": "normal"}}
            self.session = self.call("WebDriver:NewSession", {"capabilities": capabilities})
            # The window's size includes Firefox's toolbars (headless too): grown by their size,
            # so the page's viewport is width x height, as in Chromium's --window-size.
            inner = self.evaluate("[window.innerWidth, window.innerHeight, window.outerWidth, window.outerHeight]")
            self.call(
                "WebDriver:SetWindowRect",
                {"width": width + inner[2] - inner[0], "height": height + inner[3] - inner[1]},
            )
        except BaseException:
            self.close()
            raise

    def _connect(self, timeout):
        """The port Firefox writes once Marionette listens; connecting until it accepts."""
        port_file = os.path.join(self.profile, "MarionetteActivePort")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"firefox exited ({self.process.returncode}):\n{self._log_tail()}")
            try:
                with open(port_file, encoding="ascii") as file:
                    port = int(file.read().strip())
                return socket.create_connection(("127.0.0.1", port), timeout=5)
            except (OSError, ValueError):
                time.sleep(0.25)
        raise TimeoutError(f"Marionette did not listen in {timeout} s:\n{self._log_tail()}")

    def _log_tail(self):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as file:
                return "".join(file.readlines()[-20:])
        except OSError:
            return ""

    def _receive(self, timeout):
        """One message: the digits up to ':' are its length in bytes, then that much JSON."""
        deadline = time.monotonic() + timeout
        while True:
            head, colon, rest = self.buffer.partition(b":")
            if colon:
                if not head.isdigit() or len(head) > 10:
                    raise RuntimeError(f"Marionette sent no length prefix: {self.buffer[:40]!r}")
                length = int(head)
                if len(rest) >= length:
                    self.buffer = rest[length:]
                    return json.loads(rest[:length])
            elif len(head) > 10:
                raise RuntimeError(f"Marionette sent no length prefix: {self.buffer[:40]!r}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no answer from Marionette in {timeout} s")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                continue
            if not chunk:
                raise RuntimeError("Firefox closed the Marionette connection")
            self.buffer += chunk

    def call(self, command, parameters=None, timeout=60):
        self.next_id += 1
        payload = json.dumps([0, self.next_id, command, parameters or {}]).encode()
        self.sock.sendall(str(len(payload)).encode() + b":" + payload)
        deadline = time.monotonic() + timeout
        while True:
            message = self._receive(max(0.1, deadline - time.monotonic()))
            # Answers carry the command's id; anything else (an answer to an earlier command that
            # timed out here) is dropped.
            if isinstance(message, list) and len(message) == 4 and message[0] == 1 and message[1] == self.next_id:
                _, _, error, result = message
                if error:
                    raise RuntimeError(f"{command}: {error.get('error')}: {error.get('message')}")
                return result

    def goto(self, url):
        self.call("WebDriver:Navigate", {"url": url})

    def evaluate(self, expression):
        # Execute Script runs a function body in the page (its window and DOM, not an isolated
        # world: a property set on window is the page's) and, as the WebDriver spec says, awaits
        # a promise the body returns.
        result = self.call("WebDriver:ExecuteScript", {"script": f"return ({expression});", "args": []})
        return result.get("value")

    def screenshot(self, path):
        # The viewport, like Chromium's Page.captureScreenshot (full: true would be the document).
        data = self.call("WebDriver:TakeScreenshot", {"full": False})["value"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(data))

    def version(self):
        """The browser's name and version from the session's capabilities."""
        capabilities = self.session.get("capabilities", {})
        return f"{capabilities.get('browserName')} {capabilities.get('browserVersion')}"

    def close(self):
        quit_asked = False
        if self.sock:
            # Quit needs the session (it ends it too): after WebDriver:DeleteSession it is refused.
            try:
                self.call("Marionette:Quit", {"flags": ["eForceQuit"]}, timeout=10)
                quit_asked = True
            except (RuntimeError, TimeoutError, OSError):
                pass
            self.sock.close()
            self.sock = None
        if not quit_asked and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
