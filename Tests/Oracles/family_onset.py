"""Onset HOBO MX2001 water level logger (Theengs `HOBOMX2001_json.h`): manufacturer 0x00C5,
20 bytes; bytes 0–15 logger state and other channels (not decoded, random here), bytes 16–19 the
water level as float32 LE in metres (Theengs and we publish cm). Most levels are plausible
(−1…100 m), a fifth any finite float32 bit pattern."""
from __future__ import annotations

import math
import random
import struct

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def hobo_frame(rng: random.Random) -> Frame:
    if rng.random() < 0.8:
        level = struct.pack("<f", rng.uniform(-1, 100))
    else:
        while True:
            level = rng.randrange(2**32).to_bytes(4, "little")
            if math.isfinite(struct.unpack("<f", level)[0]):
                break
    body = bytes(rng.randrange(256) for _ in range(16)) + level
    return Frame(address=random_address(rng), manufacturer={0x00C5: body})


FAMILIES = [Family("Onset HOBO MX2001", "theengsdecoder 2.5.0", hobo_frame,
                   theengs_oracle(models={"HOBOMX2001"}))]
