"""Apple Continuity messages Theengs decodes (manufacturer 0x004C).

Apple Watch (Theengs `APPLEWATCH_json.h`): Nearby Info, 7 bytes: `10 05`, status byte (random),
data flags 0x98 (unlocked) or 0x18 (locked), 3 tag bytes (random).
AirPods / Beats (Theengs `APPLEAIRPODS_json.h`): proximity pairing, 27 bytes: `07 19 01`, model
(the nine models we name), status (bit 5: the first battery nibble is the right bud), buds'
battery nibbles, case byte (charging bits 0–2 in the high nibble, case battery in the low), lid,
colour (0–12 and 0x11), 17 encrypted bytes. Battery nibbles 0–10 (tens of %) and, one in ten,
15 (not connected)."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle

MODELS = [0x0220, 0x0F20, 0x0E20, 0x1420, 0x2420, 0x0A20, 0x0320, 0x0520, 0x0620]
COLORS = list(range(13)) + [0x11]


def watch_frame(rng: random.Random) -> Frame:
    body = bytes([0x10, 0x05, rng.randrange(256), rng.choice([0x18, 0x98])])
    body += bytes(rng.randrange(256) for _ in range(3))
    return Frame(address=random_address(rng), manufacturer={0x004C: body})


def nibble(rng: random.Random) -> int:
    return 15 if rng.random() < 0.1 else rng.randrange(11)


def airpods_frame(rng: random.Random) -> Frame:
    status = rng.randrange(256)
    buds = nibble(rng) << 4 | nibble(rng)
    case = rng.randrange(8) << 4 | nibble(rng)
    body = bytes([0x07, 0x19, 0x01]) + rng.choice(MODELS).to_bytes(2, "big")
    body += bytes([status, buds, case, rng.randrange(256), rng.choice(COLORS)])
    body += bytes(rng.randrange(256) for _ in range(17))
    return Frame(address=random_address(rng), manufacturer={0x004C: body})


def airpods_oracle():
    base = theengs_oracle(rename={"version": "model"}, models={"APPLEAIRPODS"})

    def run(frame: Frame) -> dict | None:
        values = base(frame)
        if not values:
            return values
        # Theengs reads battery nibble 15 (not connected) as 100 %; we publish null. Narrowed
        # (docs/parsers.md, Oracle lane): that part's battery is compared as null.
        body = frame.manufacturer[0x004C]
        if body[3:5] == b"\x0a\x20":
            # AirPods Max: Theengs' conditions leave the buds and case out for `0a20` except its
            # first right-bud ones (status bit 5 set), an omission (docs/parsers.md, Oracle lane);
            # we publish model and colour only. Narrowed: those two keys left out for the Max.
            values.pop("battery_right", None)
            values.pop("charging_right", None)
            return values
        flipped = body[5] & 0x20 != 0
        first, second, case = body[6] >> 4, body[6] & 0x0F, body[7] & 0x0F
        right, left = (first, second) if flipped else (second, first)
        for key, part in (("battery_right", right), ("battery_left", left), ("battery_case", case)):
            if part == 15 and key in values:
                values[key] = None
        return values

    return run


FAMILIES = [
    Family("Apple Watch", "theengsdecoder 2.5.0", watch_frame, theengs_oracle(models={"APPLEWATCH"})),
    Family("AirPods / Beats", "theengsdecoder 2.5.0", airpods_frame, airpods_oracle()),
]
