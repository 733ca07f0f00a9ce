"""Xiaomi Mi Band / Amazfit activity broadcast (Theengs `Miband_json.h`): manufacturer 0x0157,
24 bytes: byte 0 = 0x02 when byte 3 is the heart rate (bpm, 0xFF none), bytes 18–23 the device
address (written order, Theengs' condition); steps in service data 0xFEE0 (4 bytes, u16 LE
first). Frames: heart rate (40–219 bpm, one in ten 0xFF) with or without steps, steps alone
(byte 0 not 0x02). Theengs' `mac` (the address again) is not a reading of ours: left out. A frame
with neither value (0xFF and no steps) publishes nothing on either side: Theengs names the model
without values, we answer `unsupported`; counted as agreeing."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def huami_frame(rng: random.Random) -> Frame:
    address = random_address(rng)
    kind = rng.choice(["hr", "hr+steps", "steps"])
    heart = rng.randrange(40, 220) if rng.random() < 0.9 else 0xFF
    body = bytes([0x02 if kind != "steps" else 0x00, rng.randrange(256), rng.randrange(256), heart])
    body += b"\xff" * 14 + bytes.fromhex(address.replace(":", ""))
    frame = Frame(address=address, manufacturer={0x0157: body})
    if kind != "hr":
        frame.service = {"fee0": rng.randrange(65536).to_bytes(2, "little") + b"\x00\x00"}
    return frame


def huami_oracle():
    base = theengs_oracle(ignore={"mac", "device"}, models={"MB/SW"})

    def run(frame: Frame) -> dict | None:
        values = base(frame)
        return values or None  # no value at all: nothing published, as our `unsupported`

    return run


FAMILIES = [Family("Huami / Amazfit", "theengsdecoder 2.5.0", huami_frame, huami_oracle())]
