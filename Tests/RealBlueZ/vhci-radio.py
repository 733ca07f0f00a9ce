#!/usr/bin/python3
"""A virtual LE radio on /dev/vhci: a controller the kernel and bluetoothd bring up as an adapter
(the next hciN), which emits LE Advertising Reports of K virtual BTHome v2 sensors at a total rate
R while the host has LE scanning enabled. The instrument of the real-BlueZ lane's delivery
measurement (Tests/RealBlueZ/README.md, "The virtual radio"). Python 3.11 standard library only.

  vhci-radio.py --devices K --rate R --duration T --log FILE [--count N] [--address-base ADDR]
                [--bdaddr ADDR] [--scan-response] [--without-flags K] [--hold S] [--wait-scan S]
                [--seed N]

The controller: LE only (LMP features "LE supported" + "BR/EDR not supported"), legacy advertising
and scanning commands, no extended advertising, no privacy. Every HCI command is answered with
Command Complete (status 0); the ones the kernel reads an answer of get one of the right length,
the rest zeroed parameters. LE Set Scan Parameters and LE Set Scan Enable are printed
("SCAN-PARAMETERS type=active …", "SCAN-ENABLE enable=1 filter_duplicates=1 …") and recorded.

Each device has a fixed random static address (--address-base + its number) and an RSSI, and
sends non-connectable advertisements (ADV_NONCONN_IND; with --scan-response ADV_SCAN_IND, and in
active scanning a SCAN_RSP with its name after each) holding Flags (not for the first K devices
with --without-flags K) and BTHome v2 service data
(FCD2, unencrypted): packet id (0x00, +1 at every report of the device, mod 256), temperature
(0x02, 0.01 degC) and count (0x3E, u32: the device's report number from 0, which never wraps and
so tells the reports apart where the packet id repeats). Devices start at random phases of the
period K/R, so reports are spread out rather than in lockstep. Reports fall due also while the
host is not scanning; those are not sent and not counted (a real sensor's advertisement nobody
listens to). A report more than a second late (the radio fell behind) is skipped and counted as
"late", never sent in a burst.

Emission starts with the first scan enable and stops after --duration seconds or --count reports;
the log (JSON) is then written: per device its address, reports sent, first packet id and the
packet ids in order, the wall-clock time (Unix seconds, as mosquitto_sub's %U) each report was
written to the kernel, and the scan parameter and enable changes with their times. With --hold the
controller stays up (answering commands, sending nothing) for that many more seconds, or until
SIGTERM / SIGINT, which also end the emission early (the log is written either way).
"""
import argparse
import heapq
import json
import os
import random
import select
import signal
import struct
import sys
import time

HCI_COMMAND, HCI_ACL, HCI_EVENT, HCI_VENDOR = 0x01, 0x02, 0x04, 0xFF

# Return parameters (after the status byte) of the commands whose answer the kernel reads.
ANSWER_LENGTHS = {
    0x0C14: 248,  # Read Local Name
    0x0C23: 3,    # Read Class of Device
    0x0C25: 2,    # Read Voice Setting
    0x0C38: 1,    # Read Number of Supported IAC
    0x0C39: 1,    # Read Current IAC LAP (count 0)
    0x0C58: 1,    # Read Inquiry Response TX Power
    0x100B: 2,    # Read Local Supported Codecs (0 standard, 0 vendor)
    0x1007: 2,    # Read Country Code … (unused; 2 zero bytes are harmless)
    0x2007: 1,    # LE Read Advertising Physical Channel Tx Power
    0x200F: 1,    # LE Read Filter Accept List Size (set below)
    0x201C: 8,    # LE Read Supported States
    0x2023: 4,    # LE Read Suggested Default Data Length
    0x202A: 1,    # LE Read Resolving List Size
    0x202F: 8,    # LE Read Maximum Data Length
}
# Setters and others with no return parameters.
NO_ANSWER = {0x0C01, 0x0C03, 0x0C05, 0x0C13, 0x0C16, 0x0C18, 0x0C1A, 0x0C1E, 0x0C20, 0x0C24, 0x0C33,
             0x0C3A, 0x0C45, 0x0C47, 0x0C56, 0x0C63, 0x0C6D, 0x0C7A,
             0x2001, 0x2005, 0x2006, 0x2008, 0x2009, 0x200A, 0x200B, 0x200C, 0x2010, 0x2011, 0x2012,
             0x2024, 0x2027, 0x2028, 0x2029, 0x202D, 0x202E, 0x2031}
NAMES = {0x0C03: "Reset", 0x200B: "LE Set Scan Parameters", 0x200C: "LE Set Scan Enable"}


def supported_commands():
    """Read Local Supported Commands: the LE-only controller's commands (Core 5.x, Vol 4 Part E 6.27)."""
    octets = bytearray(64)
    octets[5] = 0xC0   # Set Event Mask, Reset
    octets[14] = 0x28  # Read Local Version Information, Read Local Supported Features
    octets[15] = 0x02  # Read BD_ADDR
    octets[25] = 0xF7  # LE Set Event Mask, Read Buffer Size, Read Local Features, Set Random Address,
    #                    Set Advertising Parameters, Read Adv. Tx Power, Set Advertising Data
    octets[26] = 0xCF  # LE Set Scan Response Data, Set Advertise Enable, Set Scan Parameters, Set Scan
    #                    Enable, Read / Clear Filter Accept List
    octets[27] = 0x03  # LE Add / Remove Device To/From Filter Accept List
    octets[28] = 0x08  # LE Read Supported States
    return bytes(octets)


def address_bytes(text):
    """'C0:DE:B7:00:00:01' → the six octets in HCI order (least significant first)."""
    parts = [int(p, 16) for p in text.replace("-", ":").split(":")]
    if len(parts) != 6 or not all(0 <= p <= 255 for p in parts):
        raise ValueError(f"not a Bluetooth address: {text}")
    return bytes(reversed(parts))


def address_text(octets):
    return ":".join(f"{b:02X}" for b in reversed(octets))


class Device:
    def __init__(self, number, address, rssi, first_packet_id):
        self.number = number
        self.address = address                  # HCI order
        self.rssi = rssi
        self.first_packet_id = first_packet_id
        self.sent = 0
        self.packet_ids = bytearray()
        self.sent_at = []                       # wall-clock time (time.time()) of each report

    def payload(self, flags=True):
        packet_id = (self.first_packet_id + self.sent) & 0xFF
        centi = 2000 + 50 * self.number + self.sent % 100  # 20.00 °C + 0.5 per device, stepping 0.01
        bthome = bytes([0x40, 0x00, packet_id, 0x02]) + struct.pack("<h", centi) + b"\x3e" \
            + struct.pack("<I", self.sent)
        service_data = bytes([len(bthome) + 3, 0x16, 0xD2, 0xFC]) + bthome
        return packet_id, (bytes([0x02, 0x01, 0x06]) if flags else b"") + service_data

    def scan_response(self):
        name = f"vhci-{self.number}".encode()
        return bytes([len(name) + 1, 0x09]) + name


class Radio:
    def __init__(self, args):
        self.args = args
        self.fd = os.open("/dev/vhci", os.O_RDWR)
        self.index = None
        self.scanning = False
        self.scan_type = None
        self.events = []                 # scan parameter / enable changes
        self.started = time.monotonic()
        self.emit_start = None
        self.emit_end = None
        self.late = 0
        self.sent = 0
        self.done = False
        self.stop = False
        rng = random.Random(args.seed)
        base = list(address_bytes(args.address_base))
        self.devices = []
        for n in range(args.devices):
            octets = bytearray(base)
            low = int.from_bytes(octets[0:3], "little") + n + 1
            octets[0:3] = (low & 0xFFFFFF).to_bytes(3, "little")
            octets[5] |= 0xC0            # random static: the two top bits set
            self.devices.append(Device(n, bytes(octets), -45 - (n * 7) % 40, rng.randrange(256)))
        self.period = args.devices / args.rate
        self.phases = [rng.random() * self.period for _ in self.devices]
        self.schedule = []

    def now(self):
        return time.monotonic() - self.started

    def write(self, packet):
        os.write(self.fd, packet)

    def event(self, code, params):
        self.write(bytes([HCI_EVENT, code, len(params)]) + params)

    def complete(self, opcode, params=b""):
        self.event(0x0E, bytes([1]) + struct.pack("<H", opcode) + b"\x00" + params)

    def answer(self, opcode, params):
        a = self.args
        if opcode == 0x0C03:                                     # Reset
            self.scanning = False
            self.complete(opcode)
        elif opcode == 0x1001:                                   # Read Local Version Information
            self.complete(opcode, struct.pack("<BHBHH", 0x09, 0x0000, 0x09, 0xFFFF, 0x0000))
        elif opcode == 0x1002:                                   # Read Local Supported Commands
            self.complete(opcode, supported_commands())
        elif opcode == 0x1003:                                   # Read Local Supported Features
            self.complete(opcode, bytes([0, 0, 0, 0, 0x60, 0, 0, 0]))  # LE, no BR/EDR
        elif opcode == 0x1004:                                   # Read Local Extended Features
            page = params[0] if params else 0
            self.complete(opcode, bytes([page, 0]) + (bytes([0, 0, 0, 0, 0x60, 0, 0, 0]) if page == 0 else bytes(8)))
        elif opcode == 0x1005:                                   # Read Buffer Size
            self.complete(opcode, struct.pack("<HBHH", 251, 0, 8, 0))
        elif opcode == 0x1009:                                   # Read BD_ADDR
            self.complete(opcode, address_bytes(a.bdaddr))
        elif opcode == 0x2002:                                   # LE Read Buffer Size
            self.complete(opcode, struct.pack("<HB", 251, 8))
        elif opcode == 0x2003:                                   # LE Read Local Supported Features
            self.complete(opcode, bytes(8))
        elif opcode == 0x200F:                                   # LE Read Filter Accept List Size
            self.complete(opcode, bytes([8]))
        elif opcode == 0x201C:                                   # LE Read Supported States
            self.complete(opcode, bytes([0xFF] * 8))
        elif opcode == 0x200B and len(params) >= 7:              # LE Set Scan Parameters
            kind, interval, window, own, policy = struct.unpack("<BHHBB", params[:7])
            self.scan_type = kind
            name = {0: "passive", 1: "active"}.get(kind, "unknown")
            self.record(f"SCAN-PARAMETERS type={name} (0x{kind:02x}) interval={interval * 0.625:g}ms "
                        f"window={window * 0.625:g}ms own_address_type={own} filter_policy={policy}",
                        {"type": name, "type_value": kind, "interval_ms": interval * 0.625,
                         "window_ms": window * 0.625, "own_address_type": own, "filter_policy": policy})
            self.complete(opcode)
        elif opcode == 0x200C and len(params) >= 2:              # LE Set Scan Enable
            enable, dup = params[0], params[1]
            self.record(f"SCAN-ENABLE enable={enable} filter_duplicates={dup}",
                        {"enable": enable, "filter_duplicates": dup})
            self.complete(opcode)
            self.set_scanning(enable == 1)
        elif opcode in ANSWER_LENGTHS:
            self.complete(opcode, bytes(ANSWER_LENGTHS[opcode]))
        elif opcode in NO_ANSWER:
            self.complete(opcode)
        else:
            # Not expected from the kernel: zeroed parameters long enough for any fixed answer it
            # could read (a longer answer than it wants is a warning in its log, a shorter one fails
            # the command), and a note.
            print(f"[vhci-radio] unknown command 0x{opcode:04x} ({len(params)} parameter bytes): "
                  "answered with 16 zero bytes", file=sys.stderr, flush=True)
            self.complete(opcode, bytes(16))

    def record(self, line, fields):
        at = round(self.now(), 3)
        print(f"[vhci-radio {at:.3f}] {line}", flush=True)
        self.events.append({"t": at, **fields})

    def set_scanning(self, on):
        self.scanning = on
        if on and self.emit_start is None and not self.done:
            self.emit_start = time.monotonic()
            first = self.emit_start
            self.schedule = [(first + phase, n) for n, phase in enumerate(self.phases)]
            heapq.heapify(self.schedule)

    def handle(self, packet):
        if not packet:
            return
        kind = packet[0]
        if kind == HCI_VENDOR and len(packet) >= 4 and self.index is None:
            self.index = struct.unpack("<H", packet[2:4])[0]
            print(f"INDEX {self.index}", flush=True)
        elif kind == HCI_COMMAND and len(packet) >= 4:
            opcode = struct.unpack("<H", packet[1:3])[0]
            self.answer(opcode, packet[4:4 + packet[3]])
        # ACL, SCO, ISO: nothing is connected; ignored.

    def emit_due(self):
        now = time.monotonic()
        args = self.args
        while self.schedule and self.schedule[0][0] <= now:
            due, n = heapq.heappop(self.schedule)
            heapq.heappush(self.schedule, (due + self.period, n))
            if not self.scanning:
                continue
            if now - due > 1.0:
                self.late += 1
                continue
            device = self.devices[n]
            packet_id, data = device.payload(flags=n >= args.without_flags)
            kind = 0x02 if args.scan_response else 0x03    # ADV_SCAN_IND / ADV_NONCONN_IND
            report = bytes([0x02, 1, kind, 0x01]) + device.address + bytes([len(data)]) + data \
                + struct.pack("<b", device.rssi)
            device.sent_at.append(round(time.time(), 6))
            self.event(0x3E, report)
            if args.scan_response and self.scan_type == 1:
                response = device.scan_response()
                self.event(0x3E, bytes([0x02, 1, 0x04, 0x01]) + device.address + bytes([len(response)])
                           + response + struct.pack("<b", device.rssi))
            device.packet_ids.append(packet_id)
            device.sent += 1
            self.sent += 1
            if args.count and self.sent >= args.count:
                self.finish_emission()
                return

    def finish_emission(self):
        if self.done:
            return
        self.done = True
        self.emit_end = time.monotonic()
        self.schedule = []
        self.write_log()
        seconds = (self.emit_end - self.emit_start) if self.emit_start else 0.0
        print(f"DONE sent={self.sent} late={self.late} seconds={seconds:.2f}", flush=True)

    def write_log(self):
        start, end = self.emit_start, self.emit_end or time.monotonic()
        seconds = (end - start) if start else 0.0
        log = {
            "index": self.index, "bdaddr": self.args.bdaddr, "devices_count": len(self.devices),
            "rate": self.args.rate, "duration": self.args.duration, "scan_response": self.args.scan_response,
            "emission_start": round(start - self.started, 3) if start else None,
            "emission_seconds": round(seconds, 3), "sent": self.sent, "late": self.late,
            "rate_achieved": round(self.sent / seconds, 1) if seconds > 0 else 0.0,
            "events": self.events,
            "devices": [{"number": d.number, "address": address_text(d.address), "rssi": d.rssi, "sent": d.sent,
                         "first_packet_id": d.first_packet_id, "packet_ids": list(d.packet_ids),
                         "sent_at": d.sent_at}
                        for d in self.devices],
        }
        tmp = self.args.log + ".tmp"
        with open(tmp, "w") as f:
            json.dump(log, f)
        os.replace(tmp, self.args.log)

    def run(self):
        self.write(bytes([HCI_VENDOR, 0x00]))                  # create a primary controller
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        args = self.args
        hold_until = None
        while not self.stop:
            now = time.monotonic()
            if not self.done and self.emit_start is not None:
                if args.duration and now - self.emit_start >= args.duration:
                    self.finish_emission()
            if not self.done and self.emit_start is None and args.wait_scan and now - self.started > args.wait_scan:
                print(f"[vhci-radio] no scan enable within {args.wait_scan:g} s", file=sys.stderr, flush=True)
                self.finish_emission()
            if self.done:
                if hold_until is None:
                    hold_until = now + args.hold
                if now >= hold_until:
                    break
                timeout = hold_until - now
            elif self.schedule:
                timeout = max(0.0, self.schedule[0][0] - now)
            else:
                timeout = 0.5
            for _fd, _mask in poller.poll(min(timeout, 0.5) * 1000):
                self.handle(os.read(self.fd, 4096))
            if not self.done:
                self.emit_due()
        self.finish_emission()
        os.close(self.fd)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=10, help="virtual devices K (1-10000)")
    p.add_argument("--rate", type=float, default=100.0, help="total reports per second R")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of emission from the first scan enable")
    p.add_argument("--count", type=int, default=0, help="stop after this many reports (0: no limit)")
    p.add_argument("--log", required=True, help="the JSON log of what was emitted")
    p.add_argument("--address-base", default="C0:DE:B7:00:00:00",
                   help="device n's address is this + n + 1 (random static: top two bits set)")
    p.add_argument("--bdaddr", default="00:AA:01:F0:00:F0", help="the controller's public address")
    p.add_argument("--scan-response", action="store_true",
                   help="scannable advertisements, and a SCAN_RSP with the name after each in active scanning")
    p.add_argument("--without-flags", type=int, default=0, metavar="K",
                   help="the first K devices leave the Flags field out of their advertisements")
    p.add_argument("--hold", type=float, default=0.0, help="seconds the controller stays up after the emission")
    p.add_argument("--wait-scan", type=float, default=0.0,
                   help="give up (write the log) when no scan starts within this many seconds (0: wait)")
    p.add_argument("--seed", type=int, default=None, help="random phases and packet ids (default: random)")
    args = p.parse_args()
    if not 1 <= args.devices <= 10000 or not 0 < args.rate <= 100000:
        p.error("--devices 1-10000, --rate > 0 and ≤ 100000")
    radio = Radio(args)

    def stop(_sig, _frame):
        radio.stop = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    radio.run()


if __name__ == "__main__":
    main()
