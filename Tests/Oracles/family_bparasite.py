"""b-parasite soil sensor, its own format (Theengs `BPARASITE_json.h`): service data 0x181A,
16 bytes (18 with the light sensor) BE: version (high nibble 1 or 2) and light flag (bit 0),
counter, battery mV u16, temperature int16 (v1 × 0.001 °C, v2 × 0.01 °C), humidity and soil
moisture u16 (× 100 / 65535 %), MAC (the sender's), illuminance lx u16 when flagged. Whole
fields, battery 2.0–3.3 V; the MAC is compared."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def bparasite_frame(rng: random.Random) -> Frame:
    address = random_address(rng)
    light = rng.random() < 0.5
    body = bytes([rng.choice([1, 2]) << 4 | light, rng.randrange(256)]) + rng.randrange(2000, 3301).to_bytes(2, "big")
    body += rng.randrange(-32768, 32768).to_bytes(2, "big", signed=True)
    body += rng.randrange(65536).to_bytes(2, "big") + rng.randrange(65536).to_bytes(2, "big")
    body += bytes.fromhex(address.replace(":", ""))
    if light:
        body += rng.randrange(65536).to_bytes(2, "big")
    return Frame(address=address, service={"181a": body})


FAMILIES = [Family("b-parasite", "theengsdecoder 2.5.0", bparasite_frame,
                   theengs_oracle(models={"BPv1.0-1.2"}))]
