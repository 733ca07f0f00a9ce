"""Otodata / Rotarex-compatible propane tank monitors (Theengs `OTOD_json.h`), manufacturer
0x03B1, frames starting `OTO`: the 19-byte `OTOTELE` frame (2 bytes not decoded, tank level u16
LE × 0.01 %, status u16 LE, 6 bytes not decoded) and the 22-byte `OTO3…` identification frame
(serial u32 LE at byte 7, model type u32 LE at byte 18). Whole u16/u32 fields."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def otodata_frame(rng: random.Random) -> Frame:
    def rand(n: int) -> bytes:
        return bytes(rng.randrange(256) for _ in range(n))

    if rng.random() < 0.6:
        level = rng.randrange(10001) if rng.random() < 0.8 else rng.randrange(65536)
        body = b"OTOTELE" + rand(2) + level.to_bytes(2, "little") + rng.randrange(65536).to_bytes(2, "little")
        body += rand(6)
    else:
        body = b"OTO3" + rand(3) + rng.randrange(2**32).to_bytes(4, "little") + rand(7)
        body += rng.randrange(2**32).to_bytes(4, "little")
    return Frame(address=random_address(rng), manufacturer={0x03B1: body})


FAMILIES = [Family("Otodata", "theengsdecoder 2.5.0", otodata_frame, theengs_oracle(models={"RC1010"}))]
