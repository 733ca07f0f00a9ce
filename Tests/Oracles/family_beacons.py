"""Plain iBeacon (Theengs `IBEACON_json.h`) and SIG battery service data (Theengs
`ServiceData_json.h`).

iBeacon: manufacturer 0x004C, 23 bytes: `02 15`, random proximity UUID, major and minor
(whole u16, BE), power byte (int8 dBm at 1 m, −100…−30; a fifth of the frames a positive byte,
which sensor beacons use for the battery in 0.1 V: both publish it as voltage).
Battery service data: 0x180F, one byte, 0–100 %."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import as_unsigned, theengs_oracle


def hyphenated(text: str) -> str:
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def ibeacon_frame(rng: random.Random) -> Frame:
    body = b"\x02\x15" + bytes(rng.randrange(256) for _ in range(16))
    body += rng.randrange(65536).to_bytes(2, "big") + rng.randrange(65536).to_bytes(2, "big")
    power = rng.randrange(1, 128) if rng.random() < 0.2 else rng.randrange(-100, -29)
    body += power.to_bytes(1, "big", signed=True)
    return Frame(address=random_address(rng), manufacturer={0x004C: body})


def battery_frame(rng: random.Random) -> Frame:
    return Frame(address=random_address(rng), service={"180f": bytes([rng.randrange(101)])})


FAMILIES = [
    Family("iBeacon", "theengsdecoder 2.5.0", ibeacon_frame,
           theengs_oracle(convert={"uuid": lambda v, out: hyphenated(v), "major": as_unsigned(16, 1),
                                   "minor": as_unsigned(16, 1)}, models={"IBEACON"})),
    Family("Battery service data", "theengsdecoder 2.5.0", battery_frame, theengs_oracle(models={"ServiceData"})),
]
