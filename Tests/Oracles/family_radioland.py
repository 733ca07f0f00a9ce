"""Radioland RDL52832 (Theengs `RDL52832_json.h`): local name `RDL52832…`, an iBeacon (0x004C)
and service data 0x0318, 16 bytes: temperature int16 BE / 256 °C (whole range), humidity u16 BE
/ 256 % (0–100 %), then per axis sign (0/1), whole g, tenths, hundredths (decimal digits).
Theengs decodes an axis only when its whole g is 0 or 1 (its conditions), so four axes in five
are within ±1.99 g and the rest up to ±9.99 g (not compared there); it reports m/s², compared
in g. Its uuid is hex without hyphens."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import as_unsigned, theengs_oracle

G = 9.80665


def hyphenated(text: str) -> str:
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def rdl_frame(rng: random.Random) -> Frame:
    beacon = b"\x02\x15" + bytes(rng.randrange(256) for _ in range(20))
    beacon += rng.randrange(-100, -29).to_bytes(1, "big", signed=True)
    data = rng.randrange(-32768, 32768).to_bytes(2, "big", signed=True) + rng.randrange(25601).to_bytes(2, "big")
    for _ in range(3):
        whole = rng.randrange(2) if rng.random() < 0.8 else rng.randrange(10)
        data += bytes([rng.randrange(2), whole, rng.randrange(10), rng.randrange(10)])
    return Frame(address=random_address(rng), name="RDL52832", manufacturer={0x004C: beacon},
                 service={"0318": data})


def to_g(value, out):
    return value / G


FAMILIES = [Family("Radioland RDL52832", "theengsdecoder 2.5.0", rdl_frame,
                   theengs_oracle(convert={"uuid": lambda v, out: hyphenated(v), "major": as_unsigned(16, 1),
                                           "minor": as_unsigned(16, 1),
                                           "accx": to_g, "accy": to_g,
                                           "accz": to_g},
                                  models={"RDL52832"}))]
