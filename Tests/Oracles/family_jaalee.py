"""Jaalee F525 / F51C temperature-humidity beacons (Theengs `JAALEE_json.h`): a 24-byte iBeacon
(0x004C, `02 15`, proximity UUID EBEFD083-70A2-47C8-9837-E7B5634DF5xx) plus a battery byte;
major = SHT raw temperature (−45 + 175 × raw / 65535 °C), minor = raw humidity (100 × raw /
65535 %), power byte tx power. The device lists service UUID F525 (or F51C). Whole u16 raw
values, battery 0–100."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def jaalee_frame(rng: random.Random) -> Frame:
    service = rng.choice(["f525", "f51c"])
    uuid = bytes.fromhex("ebefd08370a247c89837e7b5634df5") + bytes([int(service[2:], 16)])
    body = b"\x02\x15" + uuid + rng.randrange(65536).to_bytes(2, "big") + rng.randrange(65536).to_bytes(2, "big")
    body += rng.randrange(-100, -29).to_bytes(1, "big", signed=True) + bytes([rng.randrange(101)])
    return Frame(address=random_address(rng), uuids=[service], manufacturer={0x004C: body})


def unsigned_raw(value, out):
    """Theengs reads the raw major as int16, so above 42.5 °C (raw ≥ 0x8000) its temperature is
    175 × (raw − 65536) / 65535 − 45: compared as its value + 175 × 65536 / 65535 there (exact)."""
    return value + 175 * 65536 / 65535 if value < -45 else value


FAMILIES = [Family("Jaalee", "theengsdecoder 2.5.0", jaalee_frame,
                   theengs_oracle(convert={"tempc": unsigned_raw}, models={"F525/F51C"}))]
