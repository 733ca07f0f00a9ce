"""Oria T201 / T301 thermo-hygrometers (Theengs `T201_json.h`, `T301_json.h`): manufacturer 0xAA55,
big-endian: header `01 01` (T201) / `01 05` (T301), MAC (6, written order), `01 07`, temperature
int16 × 0.01 °C, humidity u16 × 0.01 %, battery %, then `00 01 00` (T201) / `00 01` (T301); named
`T201` / `T301`."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def oria_frame(rng: random.Random) -> Frame:
    model = rng.choice(["T201", "T301"])
    address = random_address(rng)
    body = bytes([1, 1 if model == "T201" else 5]) + bytes.fromhex(address.replace(":", "")) + b"\x01\x07"
    body += rng.randrange(-32768, 32768).to_bytes(2, "big", signed=True) + rng.randrange(10001).to_bytes(2, "big")
    body += bytes([rng.randrange(101)]) + (b"\x00\x01\x00" if model == "T201" else b"\x00\x01")
    return Frame(address=address, name=model, manufacturer={0xAA55: body})


FAMILIES = [Family("Oria", "theengsdecoder 2.5.0", oria_frame, theengs_oracle(models={"T201", "T301"}))]
