#!/usr/bin/env python3
"""Examples/custom-parser end to end (make test-examples): the example package's binary, which is
gattway with two Swift parsers of its own (Gattway.main(parsers:advertisementParsers:)), against
the BlueZ simulator playing Examples/custom-parser/scenario.json on a private bus
(Tests/Scripts/with-simulator.sh starts both) and a real mosquitto on a free loopback port.

Checks what a user of the example would see:
  1. `config check` of a config naming the plugin's characteristic parser: ok in the example's
     binary, exit 78 naming the parser in plain gattway;
  2. `decode`: the Mystery Tag's frame and the strap's value decoded by the example's binary,
     unknown to plain gattway;
  3. `run`: the strap's notifications (the plugin's characteristic parser, named in config.json)
     and the Mystery Tag's advertisements (the plugin's advertisement parser, no config) arrive on
     MQTT with the scenario's numbers, and bridge/devices names the tag's format.
Prints one line per check and `N passed, N failed`; exits 1 when any check failed.

Usage: custom_parser.py EXAMPLE_BINARY GATTWAY_BINARY (DBUS_SYSTEM_BUS_ADDRESS set)
"""

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE_DIR = os.path.join(HERE, "..", "..", "Examples", "custom-parser")
EXAMPLE, GATTWAY = sys.argv[1], sys.argv[2]
results = {"passed": 0, "failed": 0}

# The scenario's bytes and what they mean (Examples/custom-parser/scenario.json).
TAG_FRAME = {"manufacturer_data": {"65535": "4d5401079b084b07"}}
TAG_READINGS = {"temperature": 22.03, "battery": 75, "mystery_level": 7}
STRAP_VALUE = {"uuid": "6e400010-b5a3-f393-e0a9-e50e24dcca9e", "hex": "01485a"}
STRAP_READINGS = {"heart_rate": 72, "contact": True, "battery": 90}


def check(name, condition, detail=""):
    results["passed" if condition else "failed"] += 1
    print(("ok   " if condition else "FAIL ") + name + ("" if condition else f": {detail}"), flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def decode(binary, line):
    out = subprocess.run([binary, "decode"], input=json.dumps(line) + "\n", capture_output=True, text=True,
                         timeout=30)
    try:
        return json.loads(out.stdout.splitlines()[0])
    except (IndexError, json.JSONDecodeError):
        return {"error": f"no output (exit {out.returncode}): {out.stderr.strip()}"}


def has(state, expected):
    return all(state.get(key) == value for key, value in expected.items())


def main():
    work = tempfile.mkdtemp(prefix="gattway-example.")
    port = free_port()
    with open(os.path.join(EXAMPLE_DIR, "config.json")) as f:
        config = json.load(f)
    config["mqtt"]["server"] = f"mqtt://127.0.0.1:{port}"
    config_path = os.path.join(work, "config.json")
    with open(config_path, "w") as f:
        json.dump(config, f)

    # 1. config check.
    mine = subprocess.run([EXAMPLE, "config", "check", config_path], capture_output=True, text=True, timeout=30)
    check("config check in the example's binary passes", mine.returncode == 0 and "ok" in mine.stdout,
          (mine.returncode, mine.stdout, mine.stderr))
    plain = subprocess.run([GATTWAY, "config", "check", config_path], capture_output=True, text=True, timeout=30)
    check("config check in plain gattway fails naming strap_pulse",
          plain.returncode == 78 and '"strap_pulse" is not a characteristic parser' in plain.stderr,
          (plain.returncode, plain.stderr))

    # 2. decode.
    tag = decode(EXAMPLE, TAG_FRAME)
    check("decode: Mystery Tag frame", tag == {"format": "mystery_tag", "readings": TAG_READINGS}, tag)
    strap = decode(EXAMPLE, STRAP_VALUE)
    check("decode: strap value by its UUID", strap == {"format": "strap_pulse", "readings": STRAP_READINGS}, strap)
    unknown = decode(GATTWAY, TAG_FRAME)
    check("decode: plain gattway does not know the Mystery Tag", "error" in unknown, unknown)

    # 3. run.
    with open(os.path.join(work, "mosquitto.conf"), "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
    broker = subprocess.Popen(["mosquitto", "-c", os.path.join(work, "mosquitto.conf")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = open(os.path.join(work, "gattway.log"), "w+")
    gateway = None
    subscriber = None
    try:
        # The subscriber retries until the broker listens (mosquitto_sub exits at once otherwise).
        deadline = time.monotonic() + 10
        while True:
            subscriber = subprocess.Popen(
                ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-v", "-t", "custom/#"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            try:
                subscriber.wait(timeout=0.3)
            except subprocess.TimeoutExpired:
                break
            if time.monotonic() > deadline:
                break
        gateway = subprocess.Popen([EXAMPLE, "run", "--config", config_path], stdout=log, stderr=log)
        states = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and gateway.poll() is None:
            if has(states.get("custom/strap", {}), STRAP_READINGS) and \
               has(states.get("custom/mystery_tag", {}), TAG_READINGS) and \
               any(d.get("format") == "mystery_tag" for d in states.get("custom/bridge/devices", [])):
                break
            ready, _, _ = select.select([subscriber.stdout], [], [], 0.5)
            if not ready:
                continue
            line = subscriber.stdout.readline()
            if not line:
                break
            topic, _, payload = line.rstrip("\n").partition(" ")
            try:
                states[topic] = json.loads(payload)
            except json.JSONDecodeError:
                states[topic] = payload
        strap_state = states.get("custom/strap", {})
        check("run: strap notifications decoded by strap_pulse on custom/strap",
              has(strap_state, STRAP_READINGS), strap_state)
        tag_state = states.get("custom/mystery_tag", {})
        check("run: Mystery Tag advertisements decoded on custom/mystery_tag", has(tag_state, TAG_READINGS), tag_state)
        devices = states.get("custom/bridge/devices", [])
        check("run: bridge/devices gives the tag's format mystery_tag",
              any(d.get("name") == "mystery_tag" and d.get("format") == "mystery_tag" for d in devices), devices)
        check("run: the gateway was still running", gateway.poll() is None, f"exit {gateway.poll()}")
    finally:
        if gateway is not None and gateway.poll() is None:
            gateway.send_signal(signal.SIGTERM)
            try:
                gateway.wait(timeout=15)
            except subprocess.TimeoutExpired:
                gateway.kill()
                gateway.wait()
        for process in (subscriber, broker):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait()
    if gateway is not None:
        check("run: stops with exit 0 on SIGTERM", gateway.returncode == 0, f"exit {gateway.returncode}")
    if results["failed"]:
        log.seek(0)
        print("--- gattway log (last 40 lines) ---\n" + "".join(log.readlines()[-40:]), flush=True)
    log.close()
    shutil.rmtree(work, ignore_errors=True)
    print(f"{results['passed']} passed, {results['failed']} failed", flush=True)
    sys.exit(1 if results["failed"] else 0)


if __name__ == "__main__":
    main()
