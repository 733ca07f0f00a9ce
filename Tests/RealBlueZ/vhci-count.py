#!/usr/bin/python3
"""Counts one run of the virtual radio (vhci-radio.py): what it emitted, what the controller
delivered to the host (btmon's capture, the truth of what the kernel received), and which of those
reports reached MQTT (mosquitto_sub -v output of the gateway's state topics, or -F '%U %t %p': then
each line's receive time too).

  vhci-count.py --radio radio.json --btmon capture.btsnoop --mqtt mqtt.txt [--json OUT]
                [--cpu NAME=SECONDS ...]

A report is told apart by its device address and BTHome count object (0x3E, the device's report
number, which never wraps); its packet id (0x00) and temperature must be what the radio sent with
that count, or the reading counts as a mismatch. Prints one summary line ("emitted N, delivered
N (btmon), reached MQTT N = P %, …") and writes the figures as JSON with --json.

Latency: when the MQTT lines carry receive times and the radio's log the send times (both the
guest's wall clock), report-to-MQTT latency is the receive time of a report's first reading minus
the time the radio wrote that report to the kernel; p50 and p99 over the reports that reached MQTT.
CPU: each --cpu NAME=SECONDS (CPU time of a process over the measured window) is written with its
microseconds per delivered report, and their sum as "system".
Python 3.11 standard library only.
"""
import argparse
import json
import math
import struct
import sys


def bthome_fields(ad):
    """packet id, count and temperature (0.01 °C units) of a BTHome v2 service data AD structure."""
    i = 0
    while i + 1 < len(ad):
        length = ad[i]
        if length == 0 or i + 1 + length > len(ad):
            break
        kind, body = ad[i + 1], ad[i + 2:i + 1 + length]
        if kind == 0x16 and body[:2] == b"\xd2\xfc" and len(body) >= 3 and body[2] == 0x40:
            fields, j = {}, 3
            sizes = {0x00: 1, 0x02: 2, 0x3E: 4}
            while j < len(body) and body[j] in sizes and j + 1 + sizes[body[j]] <= len(body):
                obj, size = body[j], sizes[body[j]]
                fields[obj] = int.from_bytes(body[j + 1:j + 1 + size], "little", signed=(obj == 0x02))
                j += 1 + size
            return fields
        i += 1 + length
    return None


def read_btmon(path, index):
    """(delivered reports {(address, count)}, report events, the scan commands, btmon's drops)."""
    delivered, events, commands, drops, other = set(), 0, [], 0, 0
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"btsnoop\x00":
        raise SystemExit(f"{path}: not a btsnoop file")
    pos = 16
    while pos + 24 <= len(data):
        _orig, incl, flags, dropped, _ts = struct.unpack(">IIIIq", data[pos:pos + 24])
        packet = data[pos + 24:pos + 24 + incl]
        pos += 24 + incl
        drops = max(drops, dropped)
        if flags >> 16 != index:
            continue
        opcode = flags & 0xFFFF
        if opcode == 2 and len(packet) >= 3:                       # command to the controller
            op = struct.unpack("<H", packet[:2])[0]
            if op == 0x200B and len(packet) >= 10:
                commands.append({"command": "LE Set Scan Parameters", "type": packet[3]})
            elif op == 0x200C and len(packet) >= 5:
                commands.append({"command": "LE Set Scan Enable", "enable": packet[3],
                                 "filter_duplicates": packet[4]})
        elif opcode == 3 and len(packet) >= 4 and packet[0] == 0x3E and packet[2] == 0x02:
            events += 1
            j = 4
            for _ in range(packet[3]):                             # one report after the other, as Linux reads them
                if j + 9 > len(packet):
                    break
                kind, address = packet[j], ":".join(f"{b:02X}" for b in reversed(packet[j + 2:j + 8]))
                length = packet[j + 8]
                ad = packet[j + 9:j + 9 + length]
                j += 9 + length + 1
                fields = bthome_fields(ad) if kind != 0x04 else None
                if fields and 0x3E in fields:
                    delivered.add((address, fields[0x3E]))
                elif kind != 0x04:
                    other += 1
    return delivered, events, commands, drops, other


def read_mqtt(path, addresses):
    """The gateway's readings: {(address, count): [(packet id, temperature)]}, unparsed lines, and
    the receive time of each report's first reading {(address, count): seconds} when the lines
    start with one (mosquitto_sub -F '%U %t %p'; a topic always holds a '/', a time never)."""
    by_topic_level = {a.replace(":", ""): a for a in addresses}
    readings, unparsed, received = {}, 0, {}
    with open(path, errors="replace") as f:
        for line in f:
            topic, _, payload = line.rstrip("\n").partition(" ")
            at = None
            if "/" not in topic:
                try:
                    at = float(topic)
                except ValueError:
                    unparsed += 1
                    continue
                topic, _, payload = payload.partition(" ")
            address = by_topic_level.get(topic.rsplit("/", 1)[-1])
            if address is None:
                continue
            try:
                state = json.loads(payload)
                key = (address, int(state["count"]))
            except (ValueError, KeyError, TypeError):
                unparsed += 1
                continue
            readings.setdefault(key, []).append((state.get("packet_id"), state.get("temperature")))
            if at is not None:
                received.setdefault(key, at)
    return readings, unparsed, received


def percentile(values, fraction):
    """The nearest-rank percentile of sorted values (None when there are none)."""
    if not values:
        return None
    rank = max(1, min(len(values), math.ceil(fraction * len(values))))
    return values[rank - 1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--radio", required=True)
    p.add_argument("--btmon", required=True)
    p.add_argument("--mqtt", required=True)
    p.add_argument("--json")
    p.add_argument("--cpu", action="append", default=[], metavar="NAME=SECONDS",
                   help="a process's CPU seconds over the measured window (repeatable)")
    args = p.parse_args()
    with open(args.radio) as f:
        radio = json.load(f)
    sent = {d["address"]: d for d in radio["devices"]}
    emitted = sum(d["sent"] for d in radio["devices"])
    delivered, report_events, commands, drops, other = read_btmon(args.btmon, radio["index"])
    readings, unparsed, received = read_mqtt(args.mqtt, sent)
    reached = delivered & set(readings)
    latencies = []
    for address, count in reached:
        sent_at = sent[address].get("sent_at", [])
        if (address, count) in received and count < len(sent_at):
            latencies.append(received[(address, count)] - sent_at[count])
    latencies.sort()
    mismatches, duplicates, unknown = 0, 0, 0
    for (address, count), values in readings.items():
        device = sent[address]
        if count >= device["sent"]:
            unknown += 1
            continue
        want_id = device["packet_ids"][count]
        want_temperature = (2000 + 50 * device["number"] + count % 100) / 100  # as vhci-radio.py sends it
        duplicates += len(values) - 1
        for packet_id, temperature in values:
            if packet_id != want_id or temperature is None or abs(temperature - want_temperature) > 0.001:
                mismatches += 1
    scan_types = sorted({c["type"] for c in commands if "type" in c})
    dup_values = sorted({c["filter_duplicates"] for c in commands if c.get("enable") == 1})
    figures = {
        "index": radio["index"], "devices": radio["devices_count"], "rate": radio["rate"],
        "emission_seconds": radio["emission_seconds"], "rate_achieved": radio["rate_achieved"],
        "emitted": emitted, "late_skipped": radio["late"],
        "delivered": len(delivered), "report_events": report_events, "btmon_drops": drops,
        "other_reports": other, "reached_mqtt": len(reached),
        "mqtt_distinct": len(readings), "mqtt_not_in_btmon": len(set(readings) - delivered),
        "mqtt_readings": sum(len(v) for v in readings.values()), "mqtt_duplicates": duplicates,
        "mqtt_mismatches": mismatches, "mqtt_not_emitted": unknown, "mqtt_unparsed": unparsed,
        "percent": round(100.0 * len(reached) / len(delivered), 2) if delivered else 0.0,
        "scan_types": scan_types, "filter_duplicates": dup_values,
        "scan_commands": len(commands),
        "latency_reports": len(latencies),
        "latency_p50_ms": round(1000 * percentile(latencies, 0.50), 2) if latencies else None,
        "latency_p99_ms": round(1000 * percentile(latencies, 0.99), 2) if latencies else None,
    }
    cpu = {}
    for item in args.cpu:
        name, _, seconds = item.partition("=")
        cpu[name] = float(seconds)
    if cpu:
        cpu["system"] = sum(cpu.values())
        figures["cpu_seconds"] = {name: round(value, 3) for name, value in cpu.items()}
        figures["cpu_us_per_delivered"] = {
            name: round(1e6 * value / len(delivered), 1) if delivered else None for name, value in cpu.items()}
    print(f"emitted {emitted} in {radio['emission_seconds']} s ({radio['rate_achieved']}/s of {radio['rate']:g}/s, "
          f"{radio['late']} late and skipped), delivered {len(delivered)} (btmon, {drops} dropped by btmon), "
          f"reached MQTT {len(reached)} = {figures['percent']} %; {duplicates} duplicates, {mismatches} mismatches, "
          f"{unknown} never emitted, {figures['mqtt_not_in_btmon']} not in btmon's capture; "
          f"scan type {scan_types} (0 passive, 1 active), "
          f"filter_duplicates {dup_values}")
    if latencies:
        print(f"latency report → MQTT over {len(latencies)} reports: p50 {figures['latency_p50_ms']} ms, "
              f"p99 {figures['latency_p99_ms']} ms")
    if cpu:
        print("CPU over the window, s (µs per delivered report): " + ", ".join(
            f"{name} {value:.2f} ({figures['cpu_us_per_delivered'][name]})" for name, value in cpu.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
