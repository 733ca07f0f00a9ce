"""Oras (Theengs `Oras_json.h`, `Amphiro_json.h`).

Smart faucet, manufacturer 0x0131, 18 bytes: `00`, battery (bits 0–6 %, bit 7 random here),
`00`, serial (10 printable ASCII characters), `00`, four spaces.
Hydractiva Digital hand shower, manufacturer 0xFAEE, 19 bytes BE: session u24, duration s u16,
3 bytes, water u24 / 2560 L, temperature °C u8, energy u16 × 0.01 kWh, 5 bytes. Whole fields."""
from __future__ import annotations

import random
import string

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle

SERIAL = string.digits * 4 + string.ascii_letters + " -_"


def faucet_frame(rng: random.Random) -> Frame:
    battery = rng.randrange(101) | (0x80 if rng.random() < 0.3 else 0)
    serial = "".join(rng.choice(SERIAL) for _ in range(10)).encode()
    body = bytes([0, battery, 0]) + serial + b"\x00    "
    return Frame(address=random_address(rng), name="Smart Faucet", manufacturer={0x0131: body})


def shower_frame(rng: random.Random) -> Frame:
    def rand(n: int) -> bytes:
        return bytes(rng.randrange(256) for _ in range(n))

    body = rng.randrange(2**24).to_bytes(3, "big") + rng.randrange(65536).to_bytes(2, "big") + rand(3)
    body += rng.randrange(2**24).to_bytes(3, "big") + bytes([rng.randrange(256)])
    body += rng.randrange(65536).to_bytes(2, "big") + rand(5)
    return Frame(address=random_address(rng), name="Digital Hand Shower", manufacturer={0xFAEE: body})


FAMILIES = [
    Family("Oras faucet", "theengsdecoder 2.5.0", faucet_frame, theengs_oracle(models={"ORAS"})),
    Family("Oras Hydractiva", "theengsdecoder 2.5.0", shower_frame, theengs_oracle(models={"ADHS"})),
]
