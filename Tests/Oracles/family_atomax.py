"""Atomax Skale I/II coffee scale (Theengs `Skale_json.h`): manufacturer 0x81EF, 4 bytes: weight
int16 LE × 0.1 g, then two bytes — in the captures (Theengs' test vectors) the sign extension of
the weight and `FF`, which the generator reproduces."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def skale_frame(rng: random.Random) -> Frame:
    weight = rng.randrange(-32768, 32768)
    body = weight.to_bytes(2, "little", signed=True) + bytes([0xFF if weight < 0 else 0x00, 0xFF])
    return Frame(address=random_address(rng), name="Skale", manufacturer={0x81EF: body})


FAMILIES = [Family("Skale", "theengsdecoder 2.5.0", skale_frame, theengs_oracle(models={"SKALE"}))]
