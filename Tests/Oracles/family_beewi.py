"""Otio / BeeWi door sensor BSDOO (Theengs `BWBSDOO_json.h`): manufacturer 0x000D, `08 0C`, state
(bit 0 open; the other bits random here), one byte, battery %."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def beewi_frame(rng: random.Random) -> Frame:
    body = b"\x08\x0c" + bytes([rng.randrange(256), rng.randrange(256), rng.randrange(101)])
    return Frame(address=random_address(rng), name="BSDOO", manufacturer={0x000D: body})


FAMILIES = [Family("BeeWi door", "theengsdecoder 2.5.0", beewi_frame, theengs_oracle(models={"BSDOO"}))]
