#!/usr/bin/env python3
"""Fleet mode at scale on a real RabbitMQ cluster (`make bench-fleet`, part of `make bench`):
G `gattway run` (default 10), spread over the cluster's nodes, and D BTHome sensors (default 100)
on a line — gateway g at 10·g m, each sensor heard by the gateways within 12 m of it (2–3) at
-40 - 2.5·distance dBm (±2 dB of jitter), advertising once a second. Each gateway has its own
simulated radio (a private bus and `gattway simulate` with the sensors in its range), all started
together so that a sensor's `packet_id` counts alike in every radio that hears it.

Usage: fleet-scale.py CLUSTER_DIR GATTWAY [--gateways G] [--devices D] [--minutes M]

Measures, from a subscriber on the cluster: readings published twice (the same sensor and
packet id within 60 s), ownership changes (`device_owned` events after each sensor's first
owner) per device per hour, the fleet messages' bytes per second per gateway, and each
gateway's CPU (utime + stime from /proc) per second. Prints one line per figure and a JSON
summary line; exit 1 when a reading was published twice or a gateway died.
"""
import argparse
import json
import os
import random
import sys
import tempfile
import time

from fleetworld import mqtt_ports, private_bus, start, stop_all

parser = argparse.ArgumentParser()
parser.add_argument("cluster")
parser.add_argument("gattway")
parser.add_argument("--gateways", type=int, default=10)
parser.add_argument("--devices", type=int, default=100)
parser.add_argument("--minutes", type=float, default=5)
args = parser.parse_args()


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ports = mqtt_ports(args.cluster)
    work = tempfile.mkdtemp(prefix="fleet-scale.")
    rng = random.Random(42)
    positions = [rng.uniform(0, 10 * (args.gateways - 1)) for _ in range(args.devices)]
    addresses = ["A4:C1:38:%02X:%02X:%02X" % (0x10, d // 256, d % 256) for d in range(args.devices)]

    observed = os.path.join(work, "observed.txt")
    start(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(ports[-1]), "-i", "scale-observer", "-q", "0",
           "-F", "%U %t %p", "-t", "scale/+", "-t", "scale/bridge/+/event", "-t", "scale/fleet/+"], open(observed, "w"))
    time.sleep(1)

    buses = []
    for g in range(args.gateways):
        directory = os.path.join(work, "gw-%d" % g)
        bus = private_bus(directory)
        devices = []
        for d in range(args.devices):
            distance = abs(positions[d] - 10 * g)
            if distance > 12:
                continue
            devices.append({
                "address": addresses[d], "rssi": int(round(-40 - 2.5 * distance)), "rssi_jitter": 2,
                "interval": "1s", "connectable": False, "aligned": True,
                "service_data": {"FCD2": {"template": "bthome_v2", "fields": {
                    "packet_id": {"counter": {"start": 0, "step": 1, "min": 0, "max": 255}},
                    "temperature": 21.5, "battery": 90}}}})
        scenario = {"seed": g + 1, "adapters": [{"name": "hci0", "address": "00:AA:02:00:00:%02X" % g}],
                    "devices": devices}
        with open(os.path.join(directory, "scenario.json"), "w") as out:
            json.dump(scenario, out)
        buses.append((directory, bus))
    # All radios at once, so that packet ids count alike.
    for directory, bus in buses:
        start([args.gattway, "simulate", "--scenario", os.path.join(directory, "scenario.json")],
              open(os.path.join(directory, "simulator.log"), "w"), env=dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus))
    gateways = []
    for g, (directory, bus) in enumerate(buses):
        node = ports[g % len(ports)]
        config = {
            "mqtt": {"server": "mqtt://127.0.0.1:%d" % node,
                     "alternate_servers": ["mqtt://127.0.0.1:%d" % p for p in ports if p != node],
                     "base_topic": "scale", "client_id": "gw-%d" % g, "subscription_qos": 0, "protocol": "3.1.1",
                     "qos": 0},
            "bluetooth": {"scan": {"services": []}},
            "homeassistant": {"enabled": False},
            "health": {"enabled": False},
            "fleet": {"enabled": True},
            "devices": [{"match": {"address": a}, "name": a.replace(":", "")} for a in addresses],
        }
        path = os.path.join(directory, "config.json")
        with open(path, "w") as out:
            json.dump(config, out)
        gateways.append(start([args.gattway, "run", "--config", path, "--log-level", "notice"],
                              open(os.path.join(directory, "gattway.log"), "w"),
                              env=dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus)))
    # The first lease (15 s) passes, then the run is measured.
    time.sleep(20)
    mark = len(open(observed).read().splitlines())
    cpu_start = [cpu_seconds(p.pid) for p in gateways]
    started = time.monotonic()
    time.sleep(args.minutes * 60)
    elapsed = time.monotonic() - started
    alive = [p.poll() is None for p in gateways]
    cpu = [cpu_seconds(p.pid) - c if ok else 0 for p, c, ok in zip(gateways, cpu_start, alive)]
    lines = open(observed).read().splitlines()[mark:]

    seen = {}
    duplicates = 0
    states = 0
    owned = {}
    fleet_bytes = 0
    for line in lines:
        stamp, _, rest = line.partition(" ")
        topic, _, payload = rest.partition(" ")
        try:
            arrival = float(stamp)
        except ValueError:
            continue
        if topic.startswith("scale/fleet/"):
            fleet_bytes += len(payload.encode())
            continue
        try:
            value = json.loads(payload)
        except ValueError:
            continue
        if topic.startswith("scale/bridge/"):
            if value.get("type") == "device_owned":
                device = value.get("data", {}).get("address")
                owned[device] = owned.get(device, 0) + 1
            continue
        if "packet_id" not in value:
            continue
        states += 1
        key = (topic, value["packet_id"])
        if key in seen and arrival - seen[key] < 60:  # the counter comes round every 256 s
            duplicates += 1
        seen[key] = arrival
    changes = sum(owned.values())
    hours = elapsed / 3600
    summary = {
        "gateways": args.gateways, "devices": args.devices, "seconds": round(elapsed),
        "states": states, "duplicates": duplicates,
        "ownership_changes_per_device_per_hour": round(changes / args.devices / hours, 2),
        "fleet_bytes_per_second_per_gateway": round(fleet_bytes / elapsed / args.gateways, 1),
        "cpu_ms_per_second_per_gateway": round(1000 * sum(cpu) / elapsed / args.gateways, 2),
        "cpu_ms_per_second_max": round(1000 * max(cpu) / elapsed, 2),
        "gateways_alive": sum(alive),
    }
    print("fleet-scale: %d gateways, %d devices, %d s measured after the first lease" % (
        args.gateways, args.devices, elapsed))
    print("  readings published: %d; twice: %d" % (states, duplicates))
    print("  ownership changes: %d (%.2f per device per hour)" % (
        changes, summary["ownership_changes_per_device_per_hour"]))
    print("  fleet messages: %.1f bytes/s per gateway" % summary["fleet_bytes_per_second_per_gateway"])
    print("  CPU: %.2f ms/s per gateway (the busiest %.2f)" % (
        summary["cpu_ms_per_second_per_gateway"], summary["cpu_ms_per_second_max"]))
    print("FLEET-SCALE " + json.dumps(summary), flush=True)
    return duplicates == 0 and all(alive)


ok = False
try:
    ok = main()
finally:
    stop_all()
sys.exit(0 if ok else 1)
