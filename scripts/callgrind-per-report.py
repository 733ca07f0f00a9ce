#!/usr/bin/env python3
"""Instructions per published advertisement, counted by callgrind (not timed).

    scripts/callgrind-per-report.py [GATTWAY ...]      (default: .build/release/gattway)
    RADIO="dbus mgmt" scripts/callgrind-per-report.py  (each binary on each advertisement path)

For each gattway binary named: a private dbus-daemon, the first binary's `gattway simulate` with
ADVERTISERS (default 50) ATC1441 thermometers advertising RATE (default 100) times a second in
total at random phases (the simulator's own advDelay spreads them as a radio does), a mosquitto on
loopback, and `gattway run` under valgrind's callgrind with instrumentation off. Once the gateway
has published for WARMUP seconds (default 15), instrumentation goes on for SECONDS (default 30)
and the counts are dumped; a subscriber counts the state messages published in that window. The
figure is all of gattway's user-space instructions in the window (its code, the static Swift
runtime, libdbus, libmosquitto, libc) divided by the messages: the same binary and workload give
the same figure whatever else the machine does, so two builds can be compared on a busy machine
(BENCHMARKS.md, "Instructions per published advertisement"). With KEEP=DIR each binary's dump
is kept for `callgrind_annotate`. Not part of `make test`.

RADIO (default "dbus") names the advertisement paths to measure, `bluetooth.radio` of the config:
"dbus" (bluetoothd's Device1 properties, the simulator's PropertiesChanged signals) and "mgmt" (the
kernel's management socket, which the simulator serves with `--mgmt-socket PATH`, found by the
gateway through GATTWAY_MGMT_SOCKET; each advertisement is one Device Found event there, and the
simulated bluetoothd still sends its D-Bus signals beside it, as the real one does). With BUS=1 the
private dbus-daemon runs under callgrind too, switched on and dumped with the gateway, and its
instructions per published advertisement are printed beside gattway's (the bus's routing of the
simulator's signals: the dbus-daemon share of the whole system's cost).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

RATE = float(os.environ.get("RATE", "100"))
ADVERTISERS = int(os.environ.get("ADVERTISERS", "50"))
WARMUP = float(os.environ.get("WARMUP", "15"))
SECONDS = float(os.environ.get("SECONDS", "30"))
# KEEP=DIR keeps each binary's dump as DIR/<name>.callgrind, for callgrind_annotate.
KEEP = os.environ.get("KEEP")
RADIO = os.environ.get("RADIO", "dbus").split()
BUS = os.environ.get("BUS") == "1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scenario():
    interval = ADVERTISERS / RATE
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


def config(port, radio):
    return {
        "mqtt": {"server": f"mqtt://127.0.0.1:{port}", "client_id": "gattway-callgrind", "protocol": "3.1.1",
                 "qos": 0},
        "bluetooth": {"max_devices": 1000, "radio": radio},
        "homeassistant": {"enabled": False},
        "health": {"enabled": False},
        "devices": [{"match": {}}],
    }


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


def measure(gattway, simulator, work, radio):
    bus = os.path.join(work, "bus")
    management = os.path.join(work, "mgmt")
    port = free_port()
    with open(os.path.join(work, "mosquitto.conf"), "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
    with open(os.path.join(work, "scenario.json"), "w") as f:
        json.dump(scenario(), f)
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(config(port, radio), f)
    address = f"unix:path={bus}"
    environment = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=address)
    simulate = [simulator, "simulate", "--scenario", os.path.join(work, "scenario.json"), "--quiet"]
    if radio == "mgmt":
        simulate += ["--mgmt-socket", management]
        environment["GATTWAY_MGMT_SOCKET"] = management
    log = open(os.path.join(work, "log.txt"), "w")
    processes = []
    try:
        bus_out = os.path.join(work, "bus.callgrind")
        tool = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={bus_out}"] if BUS else []
        bus_daemon = subprocess.Popen(
            tool + ["dbus-daemon", "--session", "--nofork", f"--address={address}"], stdout=log, stderr=log)
        processes.append(bus_daemon)
        while not os.path.exists(bus):
            time.sleep(0.05)
        processes.append(subprocess.Popen(
            ["mosquitto", "-c", os.path.join(work, "mosquitto.conf")], stdout=log, stderr=log))
        processes.append(subprocess.Popen(simulate, env=environment, stdout=log, stderr=log))
        time.sleep(1)
        counter = Counter(port)
        gateway_log = os.path.join(work, "gattway.log")
        out = os.path.join(work, "callgrind.out")
        with open(gateway_log, "w") as glog:
            gateway = subprocess.Popen(
                ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", gattway,
                 "run", "--config", os.path.join(work, "config.json"), "--state-dir", work, "--log-level", "notice"],
                env=environment, stdout=glog, stderr=glog)
        processes.append(gateway)
        wait_for(gateway_log, "gateway started", 120)
        time.sleep(WARMUP)
        counted = [gateway.pid] + ([bus_daemon.pid] if BUS else [])
        for pid in counted:
            subprocess.run(["callgrind_control", "-i", "on", str(pid)], check=True, capture_output=True)
        before = counter.count
        time.sleep(SECONDS)
        for pid in counted:
            subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
        messages = counter.count - before
        counter.process.terminate()
        dump = out + ".1"
        instructions = total(dump)
        bus_instructions = total(bus_out + ".1") if BUS else None
        if KEEP:
            os.makedirs(KEEP, exist_ok=True)
            shutil.copy(dump, os.path.join(KEEP, f"{os.path.basename(gattway)}-{radio}.callgrind"))
        if instructions is None or messages == 0:
            raise SystemExit(f"{gattway}: no figure (instructions {instructions}, messages {messages})")
        return instructions, messages, bus_instructions
    finally:
        for process in reversed(processes):
            stop(process)
        log.close()


def main():
    binaries = sys.argv[1:] or [".build/release/gattway"]
    for tool in ("valgrind", "callgrind_control", "mosquitto", "mosquitto_sub", "dbus-daemon"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is missing (apt install valgrind mosquitto mosquitto-clients dbus)")
    simulator = os.path.abspath(binaries[0])
    for binary in binaries:
        for radio in RADIO:
            work = tempfile.mkdtemp(prefix="gattway-callgrind-")
            instructions, messages, bus = measure(os.path.abspath(binary), simulator, work, radio)
            print(f"{binary} (radio {radio}): {instructions / messages:,.0f} instructions per published "
                  f"advertisement ({instructions:,} in {SECONDS:.0f} s, {messages} messages, {ADVERTISERS} "
                  f"advertisers at {RATE:.0f} adv/s)", flush=True)
            if bus is not None:
                print(f"  dbus-daemon: {bus / messages:,.0f} instructions per published advertisement "
                      f"({bus:,})", flush=True)
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
