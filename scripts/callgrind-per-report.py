#!/usr/bin/env python3
"""Instructions per published advertisement, counted by callgrind (not timed).

    scripts/callgrind-per-report.py [GATTWAY ...]      (default: .build/release/gattway)
    RADIO="dbus mgmt" scripts/callgrind-per-report.py  (each binary on each advertisement path)

For each gattway binary named: a private dbus-daemon, the first binary's `gattway simulate` with
ADVERTISERS (default 50) ATC1441 thermometers advertising RATE (default 100) times a second in
total at random phases (each device starts at a random phase of its interval and the simulator's
advDelay, 0-10 ms per event, drifts them apart as a radio's are; the intervals are shortened by
its 5 ms mean so the total is RATE), a mosquitto on
loopback, and `gattway run` under valgrind's callgrind with instrumentation off. Once the gateway
has published for WARMUP seconds (default 15), instrumentation goes on for SECONDS (default 30)
and the counts are dumped; a subscriber counts the state messages published in that window. The
figure is all of gattway's user-space instructions in the window (its code, the static Swift
runtime, libdbus, libmosquitto, libc) divided by the messages: the same binary and workload give
the same figure whatever else the machine does, so two builds can be compared on a busy machine
(BENCHMARKS.md, "Instructions per published advertisement"). With KEEP=DIR each binary's dump
is kept for `callgrind_annotate`. Not part of `make test`.

RATE may name several rates ("100 1000"); the figure is printed with the rate the gateway
published at, and a warning when that falls below 95 % of the rate offered (the gateway under
callgrind, some 50 times slower, did not keep up, so the figure is not that rate's). On the
management paths a second client of the simulator's management socket records when each
advertisement went out, and the spread of the counted window is printed (the rate offered, how
far the devices' phases are from uniform, the median gap between reports): the check that the
devices advertise at random phases, not in lockstep. NATIVE=1 runs the same workload without
callgrind and prints the CPU time per message of gattway and dbus-daemon (every thread's
schedstat, to the nanosecond) and its split into user and system time (/proc/PID/stat, in 10 ms
ticks: count them before trusting the split): the kernel's share that callgrind does not see.

RADIO (default "dbus") names the advertisement paths to measure, `bluetooth.radio` of the config:
"dbus" (bluetoothd's Device1 properties, the simulator's PropertiesChanged signals), "mgmt" (the
kernel's management socket, which the simulator serves with `--mgmt-socket PATH`, found by the
gateway through GATTWAY_MGMT_SOCKET; each advertisement is one Device Found event there, and the
simulated bluetoothd still sends its D-Bus signals beside it, as the real one does) and "passive"
(the management path with `scan_mode` "passive": gattway's advertisement monitor, no discovery,
each advertisement an Advertisement Monitor Device Found and no D-Bus signal). With BUS=1 the
private dbus-daemon runs under callgrind too, switched on and dumped with the gateway, and its
instructions per published advertisement are printed beside gattway's (the bus's routing of the
simulator's signals: the dbus-daemon share of the whole system's cost).

The web server is on in every run (`web` on a free loopback port, a bearer token). PAGE (default
"closed") names what looks at it, one run of each: "closed" (nobody), "devices" (the page open
on its device list) and "radio" (the page on the radio view), as bench/Sources/WebPageClient.swift
does it: the event stream (`/api/events`) read throughout by a thread, the view's JSON as page.js
refreshes it (`/api/page/devices` every 10 s, or `/api/page/radio` every 2 s, which makes the
core's radio view listen), and `/metrics` every 5 s, each with the token. The page opens when the
gateway has started, before the warm-up. With more than one, the figures' difference from the
first's is printed. For a page run the page's own work is also read off the dump (callgrind_annotate,
inclusive counts of where it enters gattway, PER_MESSAGE and the patterns below it): per published
message, the core's mark of each state message for the event stream and the radio view's note of
each report; per call, the events' flush, a `/metrics` scrape and a request of the view, taken at the
page's own pace (a flush a second, a scrape every 5 s, the view every PACE seconds: under callgrind
on a loaded machine the timers and the page's requests slip, so what a window holds would make
the page look cheaper); and the rest of libmicrohttpd's work (parsing, the stream's writes) per
second. Under callgrind gattway keeps up with some 200 messages a second on this machine, so a
figure at 1,000 adv/s cannot be counted whole; from the parts the script prints the page's cost at
100 and 1,000 adv/s (per-message parts as they are, per-second parts spread over the rate's
messages) against the first run's figure, which does not depend on the rate.
`PAGE="closed devices radio" RATE=100 REPORT_BATCH=100ms` is the workload of `gattway-bench run
web` counted in instructions (BENCHMARKS.md, "The web page's cost"). REPORT_BATCH sets
`bluetooth.report_batch` (default: the config's default).
"""

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

# RATE may name several rates ("100 1000"): each binary is measured at each.
RATES = [float(rate) for rate in os.environ.get("RATE", "100").split()]
ADVERTISERS = int(os.environ.get("ADVERTISERS", "50"))
WARMUP = float(os.environ.get("WARMUP", "15"))
SECONDS = float(os.environ.get("SECONDS", "30"))
# KEEP=DIR keeps each binary's dump as DIR/<name>.callgrind, for callgrind_annotate.
KEEP = os.environ.get("KEEP")
RADIO = os.environ.get("RADIO", "dbus").split()
BUS = os.environ.get("BUS") == "1"
# NATIVE=1: no callgrind; the CPU time of gattway and dbus-daemon over the window, user and system.
NATIVE = os.environ.get("NATIVE") == "1"
PAGE = os.environ.get("PAGE", "closed").split()
REPORT_BATCH = os.environ.get("REPORT_BATCH")
TOKEN = "callgrind-web-token-0123456789abcdef"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The simulator adds advDelay, a pseudo-random 0-10 ms, to every advertising interval (a radio's
# 5 ms on average): the intervals are shortened by that mean, so the devices offer RATE in total.
MEAN_ADV_DELAY = 0.005


def scenario(rate):
    interval = max(ADVERTISERS / rate - MEAN_ADV_DELAY, 0.001)
    devices = []
    for index in range(ADVERTISERS):
        low = f"{(index >> 8) & 0xFF:02X}{index & 0xFF:02X}"
        devices.append({
            "address": f"A4:C1:38:5A:{low[:2]}:{low[2:]}",
            "name": f"ATC_5A{low}",
            "interval": interval,
            "connectable": False,
            "service_data": {"181A": {"template": "atc1441", "fields": {
                "counter": {"counter": {"start": 0, "step": 1, "min": 0, "max": 255}},
                "temperature": {"random": {"min": 18, "max": 26, "resolution": 0.1}},
                "humidity": {"random": {"min": 30, "max": 60, "resolution": 1}},
            }}},
        })
    return {"seed": 7, "devices": devices}


def config(port, radio, web_port):
    bluetooth = {"max_devices": 1000, "radio": "mgmt" if radio == "passive" else radio}
    if radio == "passive":
        bluetooth["scan_mode"] = "passive"
    if REPORT_BATCH:
        bluetooth["report_batch"] = REPORT_BATCH
    return {
        "web": {"listen": f"127.0.0.1:{web_port}", "auth": {"token": TOKEN}},
        "mqtt": {"server": f"mqtt://127.0.0.1:{port}", "client_id": "gattway-callgrind", "protocol": "3.1.1",
                 "qos": 0},
        "bluetooth": bluetooth,
        "homeassistant": {"enabled": False},
        "health": {"enabled": False},
        "devices": [{"match": {}}],
    }


class Page:
    """What a browser with the page open does (bench/Sources/WebPageClient.swift): the event
    stream read as it comes, the view's refresh, /metrics every 5 s."""

    def __init__(self, port, view):
        self.base = f"http://127.0.0.1:{port}"
        self.view = view
        self.requests = 0
        self.failures = 0
        self.events = 0
        self.stopped = threading.Event()
        threading.Thread(target=self._stream, daemon=True).start()
        threading.Thread(target=self._poll, daemon=True).start()

    def _open(self, path, timeout):
        request = urllib.request.Request(self.base + path, headers={"Authorization": f"Bearer {TOKEN}"})
        return urllib.request.urlopen(request, timeout=timeout)

    def _stream(self):
        try:
            with self._open("/api/events", 60) as response:
                for line in response:
                    if self.stopped.is_set():
                        return
                    if line.startswith(b"event:"):
                        self.events += 1
        except OSError:
            if not self.stopped.is_set():
                self.failures += 1

    def _get(self, path):
        try:
            with self._open(path, 30) as response:
                response.read()
                ok = response.status == 200
        except OSError:
            ok = False
        self.requests += 1
        self.failures += 0 if ok else 1

    def _poll(self):
        tick = 0
        while not self.stopped.is_set():
            if self.view == "devices" and tick % 10 == 0:
                self._get("/api/page/devices")
            if self.view == "radio" and tick % 2 == 0:
                self._get("/api/page/radio")
            if tick % 5 == 0:
                self._get("/metrics")
            tick += 1
            self.stopped.wait(1)

    def stop(self):
        self.stopped.set()


class Counter:
    """Counts the messages a mosquitto_sub prints, one per line."""

    def __init__(self, port):
        self.count = 0
        self.process = subprocess.Popen(
            ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-t", "gattway/+", "-q", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for _ in self.process.stdout:
            self.count += 1


class RadioTap:
    """The radio's side of the workload: every advertisement the simulator's management socket
    broadcasts (Device Found, or Advertisement Monitor Device Found when scanning passively), with
    the time it was read. Another client of that socket, as a second program on the kernel's is:
    neither the gateway nor the bus is involved, so it changes no count."""

    DEVICE_FOUND = 0x0012
    MONITOR_DEVICE_FOUND = 0x002F

    def __init__(self, path):
        self.reports = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(path)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while True:
            try:
                packet = self.sock.recv(4096)
            except OSError:
                return
            if not packet:
                return
            event = int.from_bytes(packet[0:2], "little")
            if event == self.DEVICE_FOUND:
                self.reports.append((time.monotonic(), packet[6:12]))
            elif event == self.MONITOR_DEVICE_FOUND:
                self.reports.append((time.monotonic(), packet[8:14]))

    def close(self):
        self.sock.close()


def phases(reports, start, end, rate):
    """How the advertisements of the counted window were spread: the rate the radio offered, and
    each device's phase in its period (ADVERTISERS / rate, which advDelay's mean keeps), the
    circular mean over its reports of the window's first ten periods (so that one report the
    reader got late moves it little). At random phases these are uniform on [0, 1): their
    Kolmogorov-Smirnov distance from the uniform stays below 1.36 / sqrt(devices) (0.19 for 50) at
    the 5 % level; in lockstep they are all alike and the distance nears 1. The times are when this
    reader got each packet: on a loaded machine the simulator's and the reader's delays clump
    reports by milliseconds or more, which the distance shows as well (a lockstep is far above it)."""
    window = [(t, address) for t, address in reports if start <= t < end]
    if len(window) < 2:
        return "no reports seen on the management socket"
    period = ADVERTISERS / rate
    angles = {}
    for t, address in window:
        if t < start + 10 * period:
            angles.setdefault(address, []).append(2 * math.pi * ((t - start) % period) / period)
    offsets = sorted(
        (math.atan2(sum(map(math.sin, a)), sum(map(math.cos, a))) / (2 * math.pi)) % 1.0 for a in angles.values())
    count = len(offsets)
    distance = max(max((i + 1) / count - x, x - i / count) for i, x in enumerate(offsets))
    times = sorted(t for t, _ in window)
    gaps = sorted(b - a for a, b in zip(times, times[1:]))
    return (f"radio: {len(times) / (end - start):,.0f} adv/s from {count} devices; their phases' distance from "
            f"uniform {distance:.2f} (random phases: below {1.36 / count ** 0.5:.2f}; lockstep: near 1); gap to "
            f"the next report p50 {gaps[len(gaps) // 2] * 1e3:.2f} ms (independent arrivals "
            f"{0.693 / rate * 1e3:.2f} ms)")


def wait_for(path, text, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                if text in f.read():
                    return
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {text!r} in {path}")


def stop(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def cpu_times(pid):
    """utime and stime of a process in seconds (proc(5): fields 14 and 15, in ticks), and its
    on-CPU time to the nanosecond (the schedstat of every thread still running)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    on_cpu = 0.0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                on_cpu += int(f.read().split()[0]) / 1e9
        except FileNotFoundError:
            pass
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks, on_cpu


def total(dump):
    """The instruction total of a callgrind dump, once it is written (None if it never is)."""
    deadline = time.monotonic() + 30
    while not os.path.exists(dump) and time.monotonic() < deadline:
        time.sleep(0.2)
    if not os.path.exists(dump):
        return None
    with open(dump) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    return None


# The page's work in a dump, by where it enters gattway (inclusive counts; each pattern's largest
# line, as a function appears once per file it was inlined from, with the most calls into it):
# per published message, the core's mark of each device's state or availability message for the
# event stream (`DeviceEvents.noteState`/`noteAvailability`) and the radio view's note of each
# report; per call, the gathered events' flush, a `/metrics` scrape and
# the requests of the view (every request `WebSite.respond` answered but the scrapes), and per
# second the rest of what libmicrohttpd runs (parsing, the stream's writes). The per-call parts are
# projected at the page's own pace — a flush a second, `/metrics` every 5 s, the view every PACE
# seconds — not counted per second of the window: under callgrind on a loaded machine the timers
# and the page client's requests slip (fewer flushes and requests in the window), which would make
# the page look cheaper than it is.
# (Builds before 2026-12-07's third pass handed every published message to the web server's
# observer, and flushed from its timer's closure: the `observe` patterns, so that their dumps
# still read.)
PER_MESSAGE = [
    ("hand-over to the event stream (states)", r"DeviceEventsC9noteState"),
    ("hand-over to the event stream (availability)", r"DeviceEventsC16noteAvailability"),
    ("hand-over to the event stream (builds before)", r"WebSiteC7observe.*MQTTOutboundMessageVYbcfU_TA\b"),
    ("radio view's note", r"RawRadioC5heard"),
]
FLUSH = r"WebSiteC5flush|WebSiteC7observe.*MQTTOutboundMessageVYbcfU_yycfU_TA\b"
METRICS = r"WebSiteC7metricsSays5UInt8VGyF\b"
RESPOND = r"WebSiteC7respond.*HTTPRequestVF$"
MHD = r"\bMHD_run\b"
# Seconds between the view's requests (page.js's refresh; bench/Sources/WebPageClient.swift).
PACE = {"devices": 10, "radio": 2}


def inclusive(text, pattern):
    """The largest inclusive count of a function matching pattern, and the most calls into it."""
    best = calls = 0
    for line in text.splitlines():
        match = re.match(r"\s*([\d,]+) \([^)]*\)\s+\*\s+(.*)", line)
        if match and re.search(pattern, match.group(2)):
            best = max(best, int(match.group(1).replace(",", "")))
        match = re.match(r"\s*[\d,]+ \([^)]*\)\s+>\s+(.*) \(([\d,]+)x\)", line)
        if match and re.search(pattern, match.group(1)):
            calls = max(calls, int(match.group(2).replace(",", "")))
    return best, calls


def parts(dump, messages, page):
    """The page's parts of a dump: (text, instructions per message, per second at the page's pace)."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--tree=calling", "--threshold=100", dump],
                          capture_output=True, text=True).stdout
    found = []
    per_message = 0.0
    for name, pattern in PER_MESSAGE:
        value = inclusive(text, pattern)[0] / messages
        per_message += value
        found.append(f"{name} {value:,.0f} per message")
    flush, flushes = inclusive(text, FLUSH)
    scrape, scrapes = inclusive(text, METRICS)
    respond, requests = inclusive(text, RESPOND)
    mhd = inclusive(text, MHD)[0]
    per_flush = flush / flushes if flushes else 0
    per_scrape = scrape / scrapes if scrapes else 0
    per_view = (respond - scrape) / (requests - scrapes) if requests > scrapes else 0
    rest = (mhd - respond) / SECONDS
    per_second = per_flush + per_scrape / 5 + per_view / PACE.get(page, 10) + rest
    found.append(f"a flush {per_flush:,.0f} ({flushes} in the window)")
    found.append(f"a /metrics scrape {per_scrape:,.0f} ({scrapes})")
    found.append(f"a view request {per_view:,.0f} ({requests - scrapes})")
    found.append(f"the rest of libmicrohttpd's work {rest:,.0f} per second")
    found.append(f"at the page's pace {per_second:,.0f} per second")
    return "; ".join(found), per_message, per_second


def measure(gattway, simulator, work, radio, rate, page):
    bus = os.path.join(work, "bus")
    management = os.path.join(work, "mgmt")
    port = free_port()
    web_port = free_port()
    with open(os.path.join(work, "mosquitto.conf"), "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
    with open(os.path.join(work, "scenario.json"), "w") as f:
        json.dump(scenario(rate), f)
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(config(port, radio, web_port), f)
    address = f"unix:path={bus}"
    environment = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=address)
    simulate = [simulator, "simulate", "--scenario", os.path.join(work, "scenario.json"), "--quiet"]
    if radio in ("mgmt", "passive"):
        simulate += ["--mgmt-socket", management]
        environment["GATTWAY_MGMT_SOCKET"] = management
    log = open(os.path.join(work, "log.txt"), "w")
    processes = []
    try:
        bus_out = os.path.join(work, "bus.callgrind")
        callgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
        tool = callgrind + [f"--callgrind-out-file={bus_out}"] if BUS and not NATIVE else []
        bus_daemon = subprocess.Popen(
            tool + ["dbus-daemon", "--session", "--nofork", f"--address={address}"], stdout=log, stderr=log)
        processes.append(bus_daemon)
        while not os.path.exists(bus):
            time.sleep(0.05)
        processes.append(subprocess.Popen(
            ["mosquitto", "-c", os.path.join(work, "mosquitto.conf")], stdout=log, stderr=log))
        processes.append(subprocess.Popen(simulate, env=environment, stdout=log, stderr=log))
        time.sleep(1)
        tap = RadioTap(management) if radio in ("mgmt", "passive") else None
        counter = Counter(port)
        gateway_log = os.path.join(work, "gattway.log")
        out = os.path.join(work, "callgrind.out")
        with open(gateway_log, "w") as glog:
            gateway = subprocess.Popen(
                ([] if NATIVE else callgrind + [f"--callgrind-out-file={out}"]) + [gattway,
                 "run", "--config", os.path.join(work, "config.json"), "--state-dir", work, "--log-level", "notice"],
                env=environment, stdout=glog, stderr=glog)
        processes.append(gateway)
        wait_for(gateway_log, "gateway started", 120)
        wait_for(gateway_log, "web: listening", 60)
        client = Page(web_port, page) if page != "closed" else None
        time.sleep(WARMUP)
        if NATIVE:
            result = native(gateway, bus_daemon, counter, tap, rate)
            if client:
                client.stop()
            return result + ("", None)
        counted = [gateway.pid] + ([bus_daemon.pid] if BUS else [])
        for pid in counted:
            subprocess.run(["callgrind_control", "-i", "on", str(pid)], check=True, capture_output=True)
        before = counter.count
        start = time.monotonic()
        time.sleep(SECONDS)
        for pid in counted:
            subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
        end = time.monotonic()
        messages = counter.count - before
        spread = phases(tap.reports, start, end, rate) if tap else None
        if tap:
            tap.close()
        counter.process.terminate()
        seen = "nobody looking"
        if client:
            client.stop()
            seen = f"page {page}: {client.requests} requests, {client.failures} failed, {client.events} events"
        dump = out + ".1"
        instructions = total(dump)
        bus_instructions = total(bus_out + ".1") if BUS else None
        if KEEP:
            os.makedirs(KEEP, exist_ok=True)
            name = f"{os.path.basename(gattway)}-{radio}-{rate:.0f}-{page}"
            shutil.copy(dump, os.path.join(KEEP, f"{name}.callgrind"))
            if BUS:
                shutil.copy(bus_out + ".1", os.path.join(KEEP, f"{name}-dbus-daemon.callgrind"))
        if instructions is None or messages == 0:
            raise SystemExit(f"{gattway}: no figure (instructions {instructions}, messages {messages})")
        shares = None
        if client:
            text, per_message, per_second = parts(dump, messages, page)
            seen += f"\n  the page's parts: {text}"
            shares = (per_message, per_second)
        return instructions, messages, bus_instructions, spread, seen, shares
    finally:
        for process in reversed(processes):
            stop(process)
        log.close()


def native(gateway, bus_daemon, counter, tap, rate):
    """The NATIVE=1 window: CPU times instead of instruction counts."""
    before = counter.count
    start = time.monotonic()
    times = [cpu_times(gateway.pid), cpu_times(bus_daemon.pid)]
    time.sleep(SECONDS)
    after = [cpu_times(gateway.pid), cpu_times(bus_daemon.pid)]
    times = [tuple(b - a for a, b in zip(old, new)) for old, new in zip(times, after)]
    end = time.monotonic()
    messages = counter.count - before
    counter.process.terminate()
    spread = phases(tap.reports, start, end, rate) if tap else None
    if tap:
        tap.close()
    if messages == 0:
        raise SystemExit("no messages published")
    return times, messages, None, spread


def main():
    binaries = sys.argv[1:] or [".build/release/gattway"]
    for tool in ("valgrind", "callgrind_control", "mosquitto", "mosquitto_sub", "dbus-daemon"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is missing (apt install valgrind mosquitto mosquitto-clients dbus)")
    simulator = os.path.abspath(binaries[0])
    for binary in binaries:
        for rate in RATES:
            for radio in RADIO:
                first = None
                for page in PAGE:
                    work = tempfile.mkdtemp(prefix="gattway-callgrind-")
                    instructions, messages, bus, spread, seen, shares = measure(
                        os.path.abspath(binary), simulator, work, radio, rate, page)
                    published = messages / SECONDS
                    if NATIVE:
                        print(f"{binary} (radio {radio}, {page}, native): {messages} messages = {published:,.0f}/s "
                              f"at {rate:.0f} adv/s offered", flush=True)
                        for name, (user, system, on_cpu) in zip(("gattway", "dbus-daemon"), instructions):
                            print(f"  {name}: {on_cpu / messages * 1e6:,.1f} µs on CPU per message; "
                                  f"user {user / messages * 1e6:,.1f} µs, system {system / messages * 1e6:,.1f} µs "
                                  f"by ticks ({(user + system) * os.sysconf('SC_CLK_TCK'):.0f} ticks; "
                                  f"system/user {system / user if user else 0:.2f})", flush=True)
                        if spread:
                            print(f"  {spread}", flush=True)
                        shutil.rmtree(work, ignore_errors=True)
                        continue
                    figure = instructions / messages
                    first = first or figure
                    difference = f", {100 * (figure / first - 1):+.1f} %" if page != PAGE[0] else ""
                    print(f"{binary} (radio {radio}, {page}): {figure:,.0f} instructions per published "
                          f"advertisement{difference} ({instructions:,} in {SECONDS:.0f} s, {messages} messages = "
                          f"{published:,.0f}/s, {ADVERTISERS} advertisers at {rate:.0f} adv/s; {seen})", flush=True)
                    if published < 0.95 * rate:
                        print(f"  published {published / rate:.0%} of the rate offered: the gateway under callgrind "
                              "did not keep up (or reports were lost), so this figure is not the rate's", flush=True)
                    if spread:
                        print(f"  {spread}", flush=True)
                    if shares and page != PAGE[0]:
                        # The parts at other rates: the per-message ones as they are, the per-second
                        # ones spread over the rate's messages, against the first run's figure.
                        projected = ", ".join(f"{100 * (shares[0] + shares[1] / at) / first:+.1f} % at {at:,} adv/s"
                                              for at in (100, 1000))
                        print(f"  the page's parts over the {PAGE[0]} figure: {projected}", flush=True)
                    if bus is not None:
                        print(f"  dbus-daemon: {bus / messages:,.0f} instructions per published advertisement "
                              f"({bus:,})", flush=True)
                    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
