"""Heart-rate straps broadcasting their rate (Theengs `PH10_json.h`, `XOSSX2_json.h`).

Polar H10, manufacturer 0x006B, 4 bytes: 3 bytes not decoded, heart rate u8 bpm.
XOSS X2, manufacturer 0xFF04, 4 bytes: 1 byte, battery (bits 0–6 %, bit 7 random here), 1 byte,
heart rate u8 bpm. Every byte value."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def polar_frame(rng: random.Random) -> Frame:
    body = bytes(rng.randrange(256) for _ in range(4))
    return Frame(address=random_address(rng), name=f"Polar H10 {rng.randrange(10**8):08d}",
                 manufacturer={0x006B: body})


def xoss_frame(rng: random.Random) -> Frame:
    body = bytes([rng.randrange(256), rng.randrange(101) | (0x80 if rng.random() < 0.3 else 0),
                  rng.randrange(256), rng.randrange(256)])
    return Frame(address=random_address(rng), name="X2", manufacturer={0xFF04: body})


FAMILIES = [
    Family("Polar H10", "theengsdecoder 2.5.0", polar_frame, theengs_oracle(models={"H10"})),
    Family("XOSS X2", "theengsdecoder 2.5.0", xoss_frame, theengs_oracle(models={"XOSSX2"})),
]
