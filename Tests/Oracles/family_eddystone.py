"""Eddystone (google/eddystone protocol specification; beacontools): service data 0xFEAA,
big-endian. UID (0x00): tx power int8, namespace (10), instance (6), 2 reserved bytes (zero).
URL (0x10): tx power, scheme 0–3, URL of printable ASCII and the expansion codes 0x00–0x0D.
TLM (0x20) version 0: battery mV (0 = not supported, one frame in ten), temperature 8.8 °C
(0x8000 = not supported, one in ten; else the whole int16), advertising count u32, uptime u32
in 0.1 s; version 1 (eTLM): 12 encrypted bytes, salt, MIC. EID (0x30): tx power, 8-byte id.
beacontools reads the TLM temperature unsigned and eTLM's salt and MIC little-endian, reports
the not-supported patterns as values (0 mV, 128 °C) and calls the raw 0.1 s uptime count
`seconds_since_boot`: compared reinterpreted (signed, byte-swapped), as null, and as count / 10 s
(the specification's meaning; docs/parsers.md, Oracle lane)."""
from __future__ import annotations

import random
import string

from families import Family, Frame, random_address

URL_CHARS = string.ascii_lowercase + string.digits + "-._~/?=&%"


def eddystone_frame(rng: random.Random) -> Frame:
    kind = rng.choice(["uid", "url", "tlm", "etlm", "eid"])
    power = rng.randrange(-100, 21).to_bytes(1, "big", signed=True)
    if kind == "uid":
        body = b"\x00" + power + bytes(rng.randrange(256) for _ in range(16)) + b"\x00\x00"
    elif kind == "url":
        url = bytearray()
        for _ in range(rng.randint(1, 17)):
            url += bytes([rng.randrange(14)]) if rng.random() < 0.2 else rng.choice(URL_CHARS).encode()
        body = b"\x10" + power + bytes([rng.randrange(4)]) + bytes(url)
    elif kind == "tlm":
        millivolts = 0 if rng.random() < 0.1 else rng.randrange(1, 65536)
        temperature = -32768 if rng.random() < 0.1 else rng.randrange(-32767, 32768)
        body = b"\x20\x00" + millivolts.to_bytes(2, "big") + temperature.to_bytes(2, "big", signed=True)
        body += rng.randrange(2**32).to_bytes(4, "big") + rng.randrange(2**32).to_bytes(4, "big")
    elif kind == "etlm":
        body = b"\x20\x01" + bytes(rng.randrange(256) for _ in range(16))
    else:
        body = b"\x30" + power + bytes(rng.randrange(256) for _ in range(8))
    return Frame(address=random_address(rng), uuids=["feaa"], service={"feaa": body})


def swap(value: int) -> int:
    return int.from_bytes(value.to_bytes(2, "little"), "big")


def eddystone_oracle(frame: Frame) -> dict | None:
    from beacontools import parse_packet
    from beacontools.packet_types import (EddystoneEIDFrame, EddystoneEncryptedTLMFrame, EddystoneTLMFrame,
                                          EddystoneUIDFrame, EddystoneURLFrame)
    data = bytes(frame.service["feaa"])
    packet = bytes([len(data) + 3, 0x16, 0xAA, 0xFE]) + data
    parsed = parse_packet(packet)
    if isinstance(parsed, EddystoneUIDFrame):
        return {"tx_power": parsed.tx_power, "namespace": parsed.namespace, "instance": parsed.instance}
    if isinstance(parsed, EddystoneURLFrame):
        return {"tx_power": parsed.tx_power, "url": parsed.url}
    if isinstance(parsed, EddystoneTLMFrame):
        # beacontools reads the 8.8 temperature unsigned; the specification says signed:
        # compared as its value − 256 from 128 °C on (exact), 0x8000 (128.0 there) as null.
        temperature = parsed.temperature
        temperature = None if temperature == 128 else temperature - 256 if temperature > 128 else temperature
        return {"version": 0, "voltage": parsed.voltage / 1000 if parsed.voltage else None,
                "temperature": temperature, "advertising_count": parsed.advertising_count,
                "uptime": parsed.seconds_since_boot / 10}
    if isinstance(parsed, EddystoneEncryptedTLMFrame):
        # beacontools reads salt and MIC little-endian, Eddystone is big-endian: byte-swapped.
        return {"version": 1, "encrypted_data": parsed.encrypted_data.hex(), "salt": swap(parsed.salt),
                "mic": swap(parsed.mic)}
    if isinstance(parsed, EddystoneEIDFrame):
        return {"tx_power": parsed.tx_power, "eid": bytes(parsed.eid).hex()}
    return None


FAMILIES = [Family("Eddystone", "beacontools 2.1.0", eddystone_frame, eddystone_oracle)]
