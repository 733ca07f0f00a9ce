"""Generic BLE tyre-pressure sensors (Theengs `TPMS_json.h`), manufacturer data with the sensor's
address inside. Company id 0x0100, 16 bytes: the sensor's address (6; the low nibble of its first
byte is the wheel, 0 → tyre 1), pressure u32 LE Pa (bar), temperature int32 LE × 0.01 °C, battery %,
status (bit 0 alarm)."""
from __future__ import annotations

import random

from families import Family, Frame
from theengs_oracle import as_signed, theengs_oracle


def tpms_frame(rng: random.Random) -> Frame:
    sensor = bytes([0x80 | rng.randrange(4), 0xEA, 0xCA]) + bytes(rng.randrange(256) for _ in range(3))
    address = ":".join(f"{b:02X}" for b in sensor)
    body = sensor + rng.randrange(2**32).to_bytes(4, "little")
    body += rng.randrange(-2**31, 2**31).to_bytes(4, "little", signed=True)
    body += bytes([rng.randrange(101), rng.randrange(256)])
    return Frame(address=address, manufacturer={0x0100: body})


FAMILIES = [
    # Theengs reads the int32 temperature unsigned (below 0 °C it reports 42 949 672.96 more than
    # the value): compared as its value − 42 949 672.96 where the sign bit is set (docs/parsers.md).
    Family("TPMS", "theengsdecoder 2.5.0", tpms_frame,
           theengs_oracle(rename={"mac": None}, convert={"tempc": as_signed(32, 0.01)}, models={"TPMS"})),
]
