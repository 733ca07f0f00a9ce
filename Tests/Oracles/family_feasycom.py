"""Feasycom beacons (Theengs `FEASY_json.h`): service data 0xFFF0, 11 bytes: model code (the 11
codes Theengs and we know), 3 bytes not decoded, MAC (written order), battery (bits 0–6 %, bit 7
random here; 0x65 = on external power, one frame in ten)."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle

MODELS = [0x15, 0x19, 0x1A, 0x1B, 0x1C, 0x1D, 0x1E, 0x24, 0x27, 0x28, 0x29]


def feasy_frame(rng: random.Random) -> Frame:
    address = random_address(rng)
    if rng.random() < 0.1:
        battery = 0x65
    else:
        battery = rng.randrange(101) | (0x80 if rng.random() < 0.3 else 0)
    body = bytes([rng.choice(MODELS)]) + bytes(rng.randrange(256) for _ in range(3))
    body += bytes.fromhex(address.replace(":", "")) + bytes([battery])
    return Frame(address=address, service={"fff0": body})


FAMILIES = [Family("Feasycom", "theengsdecoder 2.5.0", feasy_frame,
                   theengs_oracle(rename={"plugged-in": "plugged_in"}, models={"FEASY"}))]
