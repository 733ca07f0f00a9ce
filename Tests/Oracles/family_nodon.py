"""NodOn NIU smart button (Theengs `NODONNIU_json.h`): service data 0x0000, 16 bytes: bytes 10–11
the case colour (BE: 2 White, 3 TechBlue, 4 CozyGrey, 5 Wazabi, 6 Lagoon, 7 Softberry), byte 12
battery % (bits 0–6; bit 7 random here), byte 15 the event (0 none, 1 single, 2 double, 3 long
press, 4 release, 5 triple, 6 quadruple, 7 quintuple click). Theengs' integer button codes are
mapped to our event names as in the vector tests."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def nodon_frame(rng: random.Random) -> Frame:
    body = bytes(rng.randrange(256) for _ in range(10)) + rng.randrange(2, 8).to_bytes(2, "big")
    body += bytes([rng.randrange(101) | (0x80 if rng.random() < 0.5 else 0), rng.randrange(256), rng.randrange(256)])
    body += bytes([rng.randrange(8)])
    return Frame(address=random_address(rng), service={"0000": body})


FAMILIES = [Family("NodOn NIU", "theengsdecoder 2.5.0", nodon_frame,
                   theengs_oracle(rename={"button": "button"}, models={"NODONNIU"}))]
