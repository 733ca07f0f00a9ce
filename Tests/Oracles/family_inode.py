"""iNode Energy Meter (Theengs `iNodeEM_json.h`): manufacturer id 0x8290 / 0x8292 / 0x8294 /
0x8296 (the frame type; bit 2 = low battery), 11 bytes LE: average pulses per minute u16, total
pulses u32, constant u16 (bits 0–13 pulses per kWh or m³; bit 12 set = m³), battery/light byte
(high nibble: 1 = 100 %, 2…11 = (n − 1) × 10 %), two more bytes. Theengs publishes `avg` / `sum`
with their unit in `avgu` / `sumu`: kW and kWh are our `power` / `energy`, m³ our
`volume_flow_rate` / `water` (AdvertisementVectorTests.evaluate)."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import decode, theengs_oracle


def inode_frame(rng: random.Random) -> Frame:
    company = rng.choice([0x8290, 0x8292, 0x8294, 0x8296])
    # Half the totals below 65 536 pulses, where Theengs' 16-bit read of the total is still right.
    total = rng.randrange(65536) if rng.random() < 0.5 else rng.randrange(2**32)
    body = rng.randrange(65536).to_bytes(2, "little") + total.to_bytes(4, "little")
    body += rng.randrange(65536).to_bytes(2, "little") + bytes(rng.randrange(256) for _ in range(3))
    return Frame(address=random_address(rng), manufacturer={company: body})


def inode_oracle():
    base = theengs_oracle(models={"INEM"})

    def run(frame: Frame) -> dict | None:
        values = base(frame)
        if not values:
            return values
        payload = frame.manufacturer[next(iter(frame.manufacturer))]
        # Narrowed (docs/parsers.md, Oracle lane): Theengs reads only the low 16 bits of the
        # u32 total, so its `sum` is left out where the total is 65 536 pulses or more; and it
        # turns battery nibble 0 into −10 % (we publish null), left out there.
        if int.from_bytes(payload[2:6], "little") >= 65536:
            values.pop("sum", None)
        if isinstance(values.get("battery"), (int, float)) and values["battery"] < 0:
            del values["battery"]
        water = (decode(frame) or {}).get("avgu") == "m³"
        for key, ours in (("avg", "volume_flow_rate" if water else "power"), ("sum", "water" if water else "energy")):
            if key in values:
                values[ours] = values.pop(key)
        return values

    return run


FAMILIES = [Family("iNode Energy Meter", "theengsdecoder 2.5.0", inode_frame, inode_oracle())]
