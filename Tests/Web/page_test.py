#!/usr/bin/env python3
"""The web page in a real browser (issue 32, item 5; `make test-web`).

Starts `gattway demo` (a private bus, the BlueZ simulator's demo world, a real mosquitto and
`gattway run` with the web server on a free loopback port behind a token), reads the page's
address and token from what the demo prints, and drives a headless browser like a user: Chromium
(Debian's `chromium`, over its DevTools protocol: cdp_browser.py) or Firefox (Debian's
`firefox-esr`, over Marionette: marionette_browser.py), the same checks in both: the page asks for the token, the demo's
devices appear, their values change without a reload (the event stream), a device's chart is an
SVG with points, and the radio view explains an advertisement no parser knows and shows the rule
that would publish a device no rule matches, and the log view shows the last log lines. Screenshots go to --screenshots
(Firefox's named firefox-*.png).

usage: page_test.py GATTWAY [--browser chromium|firefox] [--screenshots DIR]
"""

import argparse
import json
import os
import pathlib
import re
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import cdp_browser  # noqa: E402 (the drivers beside this file)
import marionette_browser  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
DEVICES = ["battery_sensor", "env_sensor", "desk_lamp", "bthome_th", "ruuvi"]


class Demo:
    """`gattway demo` as a child; its output kept, so a failure can show it."""

    def __init__(self, gattway, duration):
        self.process = subprocess.Popen(
            [gattway, "demo", "--duration", f"{duration}s"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.output = ""

    def wait_for(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.output)
            if match:
                return match
            ready, _, _ = select.select([self.process.stdout], [], [], 0.5)
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    break
                self.output += chunk.decode(errors="replace")
        raise TimeoutError(f"gattway demo did not print {pattern!r} in {timeout} s:\n{self.output}")

    def stop(self):
        if self.process.poll() is None:
            # SIGINT: the demo stops everything it started.
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def check(condition, message):
    if not condition:
        raise AssertionError(message)
    print(f"ok: {message}")


def text_of(browser, selector):
    return browser.evaluate(f"(document.querySelector({json.dumps(selector)}) || {{}}).textContent || null")


def run(browser, base, token, screenshots, prefix=""):
    # Every check is the same in both engines. browser.evaluate takes one JavaScript expression
    # (Marionette runs `return (expression);`), so two steps are a comma expression, not `a; b`.
    # Without a session the page's address answers 401 with the page, which asks for the token.
    browser.goto(base + "/")
    browser.wait_for("!document.getElementById('login').hidden")
    status = browser.evaluate("fetch('/').then((response) => response.status)")
    check(status == 401, f"the page without a session answers {status} and asks for the token")
    browser.evaluate(
        "(document.getElementById('login-token').value = " + json.dumps(token)
        + ", document.getElementById('login-form').requestSubmit())"
    )
    browser.wait_for("location.pathname === '/' && !document.getElementById('view-devices').hidden", timeout=15)
    check(True, "logging in with the token opens the page at /")

    # The demo's devices appear, with readings and units.
    names = browser.wait_for(
        "(() => { const names = [...document.querySelectorAll('#devices tbody tr td:first-child')]"
        ".map((cell) => cell.textContent);"
        f" return {json.dumps(DEVICES)}.every((name) => names.includes(name)) && names; }})()",
        timeout=30,
    )
    check(True, f"the demo's devices appear: {', '.join(names)}")
    browser.wait_for("document.getElementById('live').textContent === 'live'", timeout=15)
    check(True, "the event stream is open (live)")
    row = "#devices tr[data-address='A4:C1:38:00:00:04']"
    reading = row + " .reading[data-name='temperature']"
    first = browser.wait_for(f"(document.querySelector({json.dumps(reading)}) || {{}}).textContent", timeout=20)
    check("°C" in first, f"bthome_th shows its temperature with its unit: {first}")

    # The values change without a reload: a marker set now survives, and the text moves.
    browser.evaluate("window.notReloaded = true")
    changed = browser.wait_for(
        f"(() => {{ const now = (document.querySelector({json.dumps(reading)}) || {{}}).textContent;"
        f" return window.notReloaded === true && now && now !== {json.dumps(first)} && now; }})()",
        timeout=20,
    )
    check(True, f"its temperature changed without a reload: {first} -> {changed}")
    browser.wait_for("document.querySelectorAll('#devices .reading').length >= 10", timeout=20)
    column = "[...document.querySelectorAll('#devices tbody tr')].map((row) => row.children[{}].textContent)"
    availability = browser.evaluate(column.format(6))
    check("online" in availability, f"availability shown: {availability}")
    links = browser.evaluate(column.format(7))
    check("connected" in links, f"link states shown: {links}")
    if screenshots:
        browser.screenshot(str(screenshots / f"{prefix}web-page.png"))

    # The page's files are the ones under webpage/, byte for byte.
    for name in ["page.js", "page.css"]:
        served = browser.evaluate(f"fetch('/{name}').then((response) => response.text())")
        check(served == (ROOT / "webpage" / name).read_text(encoding="utf-8"), f"/{name} is webpage/{name}")

    # A device's chart: an SVG polyline with a point per 2 s step, growing while it is open.
    browser.evaluate("location.hash = '#device/bthome_th'")
    chart = "#charts .chart[data-series='temperature'] svg"
    points = browser.wait_for(
        f"(() => {{ const svg = document.querySelector({json.dumps(chart)});"
        " return svg && Number(svg.getAttribute('data-points')) >= 3"
        " && svg.querySelector('polyline').getAttribute('points').split(' ').length; })()",
        timeout=30,
    )
    check(points >= 3, f"bthome_th's temperature chart is an SVG polyline of {points} points")
    title = text_of(browser, "#charts .chart[data-series='temperature'] h3")
    check(title == "temperature (°C)", f"the chart is titled with its unit: {title}")
    more = browser.wait_for(
        f"(() => {{ const svg = document.querySelector({json.dumps(chart)});"
        f" const count = svg && Number(svg.getAttribute('data-points')); return count > {points} && count; }})()",
        timeout=20,
    )
    check(True, f"the chart grew to {more} points without a reload")
    check(browser.evaluate("window.notReloaded === true"), "still the same page (no reload)")
    if screenshots:
        browser.screenshot(str(screenshots / f"{prefix}web-chart.png"))

    # Actions, through the bridge requests' code with the CSRF token: a bind key set on bthome_th
    # (a key is never echoed back), then ruuvi removed (registered again when it next advertises).
    browser.evaluate(
        "(document.getElementById('bindkey').value = '00112233445566778899aabbccddeeff',"
        " document.getElementById('actions').requestSubmit())"
    )
    result = browser.wait_for("document.getElementById('action-result').textContent")
    check(result == "device/bindkey: ok", f"setting a bind key from the page: {result}")
    browser.evaluate("location.hash = '#device/ruuvi'")
    browser.evaluate("window.confirm = () => true")
    browser.wait_for("document.getElementById('device-name').textContent === 'ruuvi'")
    browser.evaluate("document.getElementById('remove').click()")
    browser.wait_for("location.hash === '#devices'")
    check(True, "removing ruuvi from the page answered ok and went back to the devices")
    forbidden = browser.evaluate(
        "fetch('/api/page/request/device/remove', {method: 'POST', body: '{\"device\": \"env_sensor\"}'})"
        ".then((response) => response.status)"
    )
    check(forbidden == 403, f"the same request without the CSRF token answers {forbidden}")

    # A command from the lamp's page: the commands its rule declares are offered; "light" true is
    # written to the lamp and the page shows the response gattway/lamp/response carries.
    browser.evaluate("location.hash = '#device/desk_lamp'")
    offered = browser.wait_for(
        "(() => { const options = [...document.querySelectorAll('#send-kind option')].map((o) => o.textContent);"
        " return !document.getElementById('send').hidden && options.length > 0 && options; })()"
    )
    check(any(option.startswith("command light") for option in offered), f"the desk lamp's page offers: {offered}")
    browser.evaluate(
        "(() => { const select = document.getElementById('send-kind');"
        " select.value = [...select.options].find((o) => o.textContent.startsWith('command light')).value;"
        " document.getElementById('send-value').value = 'true';"
        " document.getElementById('send').requestSubmit(); return true; })()"
    )
    answer = browser.wait_for(
        "(() => { const text = document.getElementById('send-result').textContent;"
        " return !text.includes('waiting') && text; })()",
        timeout=40,
    )
    check(answer == "command: ok", f"the lamp's command answered from the page: {answer}")
    forbidden = browser.evaluate(
        "fetch('/api/page/send/command', {method: 'POST',"
        " body: '{\"device\": \"desk_lamp\", \"command\": \"light\", \"value\": false}'})"
        ".then((response) => response.status)"
    )
    check(forbidden == 403, f"a command without the CSRF token answers {forbidden}")

    # The fleet and the proxy: the demo runs neither, and the views say so.
    browser.evaluate("location.hash = '#fleet'")
    browser.wait_for("!document.getElementById('fleet-off').hidden")
    fleet_text = text_of(browser, "#fleet-off")
    check("not in a fleet" in fleet_text, f"the fleet view: {fleet_text}")
    check(browser.evaluate("document.getElementById('fleet-on').hidden"), "no empty fleet table")
    browser.evaluate("location.hash = '#proxy'")
    browser.wait_for("!document.getElementById('proxy-off').hidden")
    proxy_text = text_of(browser, "#proxy-off")
    check("proxy is off" in proxy_text, f"the proxy view: {proxy_text}")

    # The radio: every address heard, its AD bytes, and why it is not published.
    browser.evaluate("location.hash = '#radio'")
    mystery = "#radio tr[data-address='F0:0D:00:00:00:07']"
    outcome = browser.wait_for(f"(document.querySelector({json.dumps(mystery + ' .outcome')}) || {{}}).textContent")
    check(
        "no rule matches" in outcome and "unknown format" in outcome,
        f"the radio view explains the Mystery Tag's advertisement: {outcome}",
    )
    data = text_of(browser, mystery + " .hex")
    check("0f0f0a0b0c0d0e0f" in data, f"with its raw AD bytes: {data}")
    rate = text_of(browser, "#radio-rate")
    check(rate and "reports/s" in rate, f"reports per second shown: {rate}")
    garden = "#radio tr[data-address='A4:C1:38:00:00:08']"
    browser.wait_for(f"!!document.querySelector({json.dumps(garden + ' .rule-button')})")
    browser.evaluate(f"document.querySelector({json.dumps(garden + ' .rule-button')}).click()")
    rule = browser.wait_for(
        "!document.getElementById('rule').hidden && document.getElementById('rule-json').textContent"
    )
    check(
        json.loads(rule) == {"match": {"address": "A4:C1:38:00:00:08"}},
        f"the Rule button shows the rule that would publish Garden TH: {json.dumps(json.loads(rule))}",
    )
    if screenshots:
        browser.screenshot(str(screenshots / f"{prefix}web-radio.png"))

    # Health: the bridge/health figures.
    browser.evaluate("location.hash = '#health'")
    browser.wait_for("document.querySelectorAll('#health dt').length > 5")
    keys = browser.evaluate("[...document.querySelectorAll('#health > dl > dt')].map((term) => term.textContent)")
    check("web" in keys and "radio" in keys, f"health shows bridge/health's sections: {', '.join(keys)}")
    # The log: the last lines of gattway run's log, the token never among them.
    browser.evaluate("location.hash = '#log'")
    lines = browser.wait_for(
        "(() => { const lines = [...document.querySelectorAll('#log tbody tr td:last-child')]"
        ".map((cell) => cell.textContent); return lines.some((line) => line.includes('web: listening')) && lines; })()"
    )
    check(True, f"the log view shows gattway run's last {len(lines)} lines, the web server's start among them")
    check(not any(token in line for line in lines), "the token is not in the log view")
    check(any("device/remove requested from the page" in line for line in lines), "the page's removal is logged")
    check(any("web: command sent from the page" in line for line in lines), "the page's command is logged")
    check(not any("00112233445566778899aabbccddeeff" in line for line in lines), "the bind key is not in the log view")
    # config check of the running configuration: the demo's file, valid and as running.
    browser.evaluate("location.hash = '#config'")
    verdict = browser.wait_for(
        "(() => { const terms = [...document.querySelectorAll('#config dt')];"
        " const at = terms.findIndex((term) => term.textContent === 'config check');"
        " return at >= 0 && document.querySelectorAll('#config dd')[at].textContent; })()"
    )
    running = text_of(browser, "#config dd")
    check(verdict == "ok, as running", f"config check of the running configuration: {verdict}; {running}")
    check(running.startswith("5 device rules, 1 declarative parser, 1 command"), "the running configuration's summary")
    check(browser.evaluate("window.notReloaded === true"), "the whole visit was one page load")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("gattway")
    parser.add_argument("--screenshots", type=pathlib.Path)
    parser.add_argument("--browser", choices=["chromium", "firefox"], default="chromium")
    parser.add_argument("--chromium", default="chromium")
    parser.add_argument("--firefox", default="firefox-esr")
    arguments = parser.parse_args()
    if arguments.screenshots:
        arguments.screenshots.mkdir(parents=True, exist_ok=True)
    demo = Demo(arguments.gattway, duration=300)
    browser = None
    try:
        match = demo.wait_for(r"page: (http://127\.0\.0\.1:\d+)/ \(log in with the token ([0-9a-f]+)\)", timeout=60)
        base, token = match.group(1), match.group(2)
        check(True, f"gattway demo prints the page's address: {base}/")
        demo.wait_for(r"command round trip OK", timeout=60)
        if arguments.browser == "firefox":
            browser = marionette_browser.Browser(arguments.firefox, profile_parent=str(ROOT / ".build" / "test-web"))
        else:
            browser = cdp_browser.Browser(arguments.chromium)
        # The version that runs the checks, as the browser itself reports it.
        print(f"browser: {browser.version()}")
        run(browser, base, token, arguments.screenshots, "firefox-" if arguments.browser == "firefox" else "")
    except (AssertionError, TimeoutError, RuntimeError) as error:
        print(f"FAIL: {error}\n--- gattway demo printed:\n{demo.output}", file=sys.stderr)
        return 1
    finally:
        if browser:
            browser.close()
        demo.stop()
    print(f"web page in {arguments.browser}: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
