#!/usr/bin/env python3
"""Fleet mode on a real RabbitMQ cluster: three `gattway run`, one per node, each with its own
simulated radio (a private dbus-daemon and `gattway simulate`) in which the same BTHome sensor
advertises ten times a second at a different RSSI (-60, -70, -80 dBm). Which gateway published a
state shows in its `rssi`; the sensor's `packet_id` counts up by one per advertisement, so a
reading published twice shows as a repeated `packet_id`.

Usage: fleet-gateways.py [--edges] CLUSTER_DIR GATTWAY  (a cluster started by cluster.sh, 3 nodes)

With --edges each gateway talks to a mosquitto of its own (an edge broker, as on each Pi) bridged
to the cluster (`cluster.sh edge`: every node listed, its own first), instead of to a node.

Checks, one `PASS|FAIL fleet.gateways.NAME detail` line each:
  started          the three gateways connect, each to its own node, with alternate nodes;
  one-owner        the gateway that hears the sensor best (-60) alone publishes it, every packet
                   id once, read by a subscriber on the third node;
  node-killed      the first gateway's node is SIGKILLed: it moves to another node at once (its
                   next state arrives), it keeps the sensor, no packet id is published twice and
                   none goes missing (with --edges at most one: the edge bridge's message in
                   flight to the killed node);
  lamp-connected   a `connect: true` lamp heard by all three is connected by its owner alone;
  set-once         a /set is written to the lamp once (the simulators' write counters) and
                   answered once;
  owner-killed     the first gateway is SIGKILLed: the second (-70) publishes within lease + 2 s,
                   no packet id twice;
  moved            the sensor moves away from the second gateway (its radio hears it at -95):
                   the third takes it over once, no packet id twice;
Prints 'N passed, N failed'; exit 1 on any failure. Stops everything it started.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from fleetworld import mqtt_ports, private_bus, start, stop_all

EDGES = "--edges" in sys.argv[1:]
CLUSTER, GATTWAY = [a for a in sys.argv[1:] if a != "--edges"][:2]
PREFIX = "fleet.edges." if EDGES else "fleet.gateways."
HERE = os.path.dirname(os.path.abspath(__file__))
SENSOR = "A4:C1:38:00:00:04"
LAMP = "A4:C1:38:00:00:03"
LEVELS = [-60, -70, -80]
LEASE = 3
RESULTS = []


def result(ok, name, detail):
    line = "%s %s%s %s" % ("PASS" if ok else "FAIL", PREFIX, name, detail)
    RESULTS.append(ok)
    print(line, flush=True)


def world(directory, rssi):
    """A private bus and the simulator on it, with the sensor at `rssi`; returns the bus address."""
    address = private_bus(directory)
    scenario = {
        "seed": 1,
        "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:0%d" % (LEVELS.index(rssi) + 1)}],
        "devices": [{
            "address": SENSOR, "name": "BTHome TH", "rssi": rssi, "rssi_jitter": 1, "interval": "100ms",
            "connectable": False, "aligned": True,
            "service_data": {"FCD2": {"template": "bthome_v2", "fields": {
                "packet_id": {"counter": {"start": 0, "step": 1, "min": 0, "max": 255}},
                "temperature": 21.5, "battery": 93}}}},
            {"address": LAMP, "name": "Desk Lamp", "rssi": rssi + 5, "interval": "200ms",
             "service_uuids": ["ff00"],
             "gatt": [{"uuid": "ff00", "characteristics": [
                 {"uuid": "ff01", "flags": ["write", "write-without-response"], "reflect_writes_to": "ff02"},
                 {"uuid": "ff02", "flags": ["read", "notify"], "value": {"hex": "00"}}]}]}],
    }
    with open(os.path.join(directory, "scenario.json"), "w") as out:
        json.dump(scenario, out)
    start([GATTWAY, "simulate", "--scenario", os.path.join(directory, "scenario.json")],
          open(os.path.join(directory, "simulator.log"), "w"), env=dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=address))
    for _ in range(200):
        if "simulating" in open(os.path.join(directory, "simulator.log")).read().lower() or \
                subprocess.run(["busctl", "--address=" + address, "status", "org.bluez"],
                               capture_output=True).returncode == 0:
            break
        time.sleep(0.05)
    return address


def gateway(directory, index, ports, address, edge=None):
    others = [p for p in ports if p != ports[index]]
    mqtt = {"server": "mqtt://127.0.0.1:%d" % ports[index],
            "alternate_servers": ["mqtt://127.0.0.1:%d" % p for p in others],
            "base_topic": "gattway", "client_id": "gw-%d" % (index + 1), "subscription_qos": 0,
            "protocol": "3.1.1"}
    if edge:
        mqtt = {"server": "mqtt://127.0.0.1:%d" % edge, "base_topic": "gattway", "client_id": "gw-%d" % (index + 1)}
    config = {
        "mqtt": mqtt,
        "bluetooth": {"scan": {"services": []}},
        "homeassistant": {"enabled": False},
        "health": {"enabled": False},
        "fleet": {"enabled": True, "lease": "%ds" % LEASE, "handover_after": "2s"},
        "state_directory": os.path.join(directory, "state"),
        "devices": [{"match": {"address": SENSOR}, "name": "bthome_th"},
                    {"match": {"address": LAMP}, "name": "lamp", "connect": True,
                     "commands": {"light": {"service": "ff00", "characteristic": "ff01", "encoding": "bool"}}}],
    }
    os.makedirs(os.path.join(directory, "state"), exist_ok=True)
    path = os.path.join(directory, "config.json")
    with open(path, "w") as out:
        json.dump(config, out)
    log = os.path.join(directory, "gattway.log")
    process = start([GATTWAY, "run", "--config", path, "--log-level", "info"], open(log, "w"),
                    env=dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=address))
    return process, log


def states(path, after=0):
    """(arrival line number, packet id, rssi) of the sensor's states in the subscriber's file."""
    found = []
    for number, line in enumerate(open(path).read().splitlines()):
        if number < after or not line.startswith("gattway/bthome_th "):
            continue
        try:
            payload = json.loads(line.split(" ", 1)[1])
        except ValueError:
            continue
        if "packet_id" in payload and "rssi" in payload:
            found.append((number, int(payload["packet_id"]), payload["rssi"]))
    return found


def counter(bus, name):
    """A counter of the simulator on `bus` (io.gattway.Simulator1.Counters)."""
    out = subprocess.run(["busctl", "--address=" + bus, "call", "org.bluez", "/io/gattway/Simulator",
                          "io.gattway.Simulator1", "Counters"], capture_output=True, text=True).stdout
    found = re.search(r'"%s" (\d+)' % name, out)
    return int(found.group(1)) if found else -1


def lines(path):
    return len(open(path).read().splitlines())


def repeats(found):
    seen, again = set(), []
    for _, packet, _ in found:
        if packet in seen:
            again.append(packet)
        seen.add(packet)
    return again


def missing(found):
    """Packet ids between consecutive states that were never published (the counter wraps at 256)."""
    lost = []
    for (_, a, _), (_, b, _) in zip(found, found[1:]):
        step = (b - a) % 256
        lost.extend((a + k) % 256 for k in range(1, step)) if step < 128 else None
    return lost


def source(rssi):
    return min(range(3), key=lambda i: abs(LEVELS[i] - rssi))


def wait(predicate, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def main():
    ports = mqtt_ports(CLUSTER)
    if len(ports) < 3:
        raise SystemExit("fleet-gateways.py: the cluster has %d nodes, 3 needed" % len(ports))
    work = tempfile.mkdtemp(prefix="fleet-gateways.")
    observed = os.path.join(work, "observed.txt")
    start(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(ports[2]), "-i", "fleet-observer", "-q", "1", "-v",
           "-t", "gattway/bthome_th", "-t", "gattway/bridge/+/state", "-t", "gattway/lamp/response"],
          open(observed, "w"))
    time.sleep(1)
    gateways = []
    edges = []
    buses = []
    for index, rssi in enumerate(LEVELS):
        directory = os.path.join(work, "gw-%d" % (index + 1))
        address = world(directory, rssi)
        buses.append(address)
        edge = None
        if EDGES:
            edge = 18880 + index + 1
            upstream = [ports[index]] + [p for p in ports if p != ports[index]]
            made = subprocess.run([os.path.join(HERE, "cluster.sh"), "edge", CLUSTER, "gw%d" % (index + 1), str(edge)]
                                  + [str(p) for p in upstream], capture_output=True, text=True)
            if made.returncode != 0:
                raise SystemExit("fleet-gateways.py: edge %d: %s" % (index + 1, made.stderr.strip()[-300:]))
            edges.append("gw%d" % (index + 1))
        gateways.append(gateway(directory, index, ports, address, edge))

    def log_tail(index, count=8):
        return " | ".join(open(gateways[index][1]).read().splitlines()[-count:])

    connected = wait(lambda: all("MQTT: connected to" in open(log).read() for _, log in gateways), 30)
    nodes = [re.findall(r"MQTT: connected to (\S+)", open(log).read())[:1] for _, log in gateways]
    result(connected, "started", "connected: %s" % nodes if connected else log_tail(0))

    # One owner after the first lease: every packet id once, all from gw-1.
    if not wait(lambda: len(states(observed)) > 0, 30):
        result(False, "one-owner", "no state in 30 s: " + log_tail(0))
        return
    time.sleep(5)
    first = states(observed)
    publishers = sorted(set(source(rssi) + 1 for _, _, rssi in first))
    result(len(first) >= 20 and not repeats(first) and publishers == [1], "one-owner",
           "%d states, publishers gw-%s, packet ids twice: %s" % (len(first), publishers, repeats(first)[:10]))

    # gw-1's node is SIGKILLed: gw-1 (or its edge's bridge) moves on to another node and keeps
    # publishing, once each.
    mark = lines(observed)
    killed = time.monotonic()
    subprocess.run([os.path.join(HERE, "cluster.sh"), "kill", CLUSTER, "1"], check=False, capture_output=True)
    resumed = wait(lambda: any(source(r) == 0 for _, _, r in states(observed, mark)), 20)
    moved_after = time.monotonic() - killed
    time.sleep(4)
    after = states(observed, mark)
    # The readings of the move are carried by the store-and-forward stage to the next node: none
    # goes missing between the last state before the kill and the ones after it.
    around = states(observed, max(0, mark - 3))
    # Through an edge, gattway's own hop (to its edge broker, never killed) is acknowledged; the
    # edge bridge's one message in flight to the killed node can be lost beyond it (seen once in
    # six runs, docs/fleet.md "Failover"): at most one there, none on a direct connection.
    allowed = 1 if EDGES else 0
    result(resumed and not repeats(after) and set(source(r) for _, _, r in after) <= {0}
           and len(missing(around)) <= allowed,
           "node-killed",
           "gw-1's next state after %.1f s (%s); %d states since, publishers %s, packet ids twice: %s, "
           "never published: %s" % (
               moved_after, (re.findall(r"MQTT: connected to (\S+)", open(gateways[0][1]).read()) or ["?"])[-1],
               len(after), sorted(set(source(r) + 1 for _, _, r in after)), repeats(after)[:10], missing(around)[:10]))

    # The lamp: connected by its owner (gw-1, which hears it best) alone; a /set runs once.
    wait(lambda: sum(counter(bus, "Connects") > 0 for bus in buses) >= 1, 30)
    time.sleep(2)
    connects = [counter(bus, "Connects") for bus in buses]
    result(connects[0] >= 1 and connects[1:] == [0, 0], "lamp-connected", "connects per radio: %s" % connects)
    mark = lines(observed)
    writes_before = [counter(bus, "Writes") for bus in buses]
    subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(ports[2]), "-q", "1", "-t", "gattway/lamp/set",
                    "-m", '{"light": true, "transaction": "set-once"}'], check=False)
    answered = wait(lambda: "set-once" in "".join(open(observed).read().splitlines()[mark:]), 20)
    time.sleep(3)
    responses = [line for line in open(observed).read().splitlines()[mark:]
                 if line.startswith("gattway/lamp/response ")]
    writes = [counter(bus, "Writes") - before for bus, before in zip(buses, writes_before)]
    result(answered and len(responses) == 1 and '"status":"ok"' in responses[0] and sum(writes) == 1,
           "set-once", "responses %d %s; writes per radio %s" % (len(responses), responses[:1], writes))

    # gw-1 is SIGKILLed: gw-2 owns the sensor within lease + 2 s.
    mark = lines(observed)
    killed = time.monotonic()
    gateways[0][0].send_signal(signal.SIGKILL)
    taken = wait(lambda: any(source(r) == 1 for _, _, r in states(observed, mark)), 20)
    took = time.monotonic() - killed
    time.sleep(2)
    after = states(observed, mark)
    result(taken and took <= LEASE + 2 + 0.5 and not repeats(after), "owner-killed",
           "gw-2 published after %.1f s (lease %d s; its will came first); %d states since, packet ids twice: %s, "
           "not published in the takeover: %d" % (took, LEASE, len(after), repeats(after)[:10],
                                                  len(missing(states(observed, max(0, mark - 3))))))

    # The sensor moves away from gw-2 (its radio hears it at -95 now): gw-3 (-80) takes it over
    # after handover_after (2 s), once.
    mark = lines(observed)
    moved = subprocess.run(["busctl", "--address=" + buses[1], "call", "--", "org.bluez", "/io/gattway/Simulator",
                            "io.gattway.Simulator1", "SetRSSI", "sn", SENSOR, "-95"], capture_output=True, text=True)
    if moved.returncode != 0:
        result(False, "moved", "SetRSSI: " + moved.stderr.strip())
        return
    handed = wait(lambda: any(source(r) == 2 for _, _, r in states(observed, mark)), 20)
    time.sleep(3)
    after = states(observed, mark)
    order = [("a", "b", "c")[source(r)] if r > -90 else "b" for _, _, r in after]
    switches = sum(1 for x, y in zip(order, order[1:]) if x != y)
    result(handed and switches == 1 and order[-1:] == ["c"] and not repeats(after), "moved",
           "publisher by state: %s; packet ids twice: %s" % ("".join(order), repeats(after)[:10]))
    for name in edges:
        subprocess.run([os.path.join(HERE, "cluster.sh"), "edge-stop", CLUSTER, name], capture_output=True)


try:
    main()
finally:
    stop_all()
passed = sum(RESULTS)
print("%s: %d passed, %d failed" % (PREFIX.rstrip("."), passed, len(RESULTS) - passed))
sys.exit(0 if RESULTS and all(RESULTS) else 1)
