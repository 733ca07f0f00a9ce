"""Small vendor formats only Theengs decodes (each its own family):

- Oria T201 / T301 (Theengs `T201_json.h`, `T301_json.h`): manufacturer 0xAA55, big-endian:
  header `01 01` (T201) / `01 05` (T301), MAC (6, written order), `01 07`, temperature int16
  × 0.01 °C, humidity u16 × 0.01 %, battery %, then `00 01 00` (T201) / `00 01` (T301); named
  `T201` / `T301`.
- SmartDry laundry sensor (Theengs `SmartDry_json.h`): manufacturer 0x01AE, 12 bytes LE:
  temperature float32 °C, humidity float32 %, shake u16, battery byte (mV − 2847), status (bit 0
  awake).
- Otio / BeeWi door sensor BSDOO (Theengs `BWBSDOO_json.h`): manufacturer 0x000D, `08 0C`, state
  (bit 0 open), one byte, battery %.
"""
from __future__ import annotations

import random
import struct

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def oria_frame(rng: random.Random) -> Frame:
    model = rng.choice(["T201", "T301"])
    address = random_address(rng)
    body = bytes([1, 1 if model == "T201" else 5]) + bytes.fromhex(address.replace(":", "")) + b"\x01\x07"
    body += rng.randrange(-32768, 32768).to_bytes(2, "big", signed=True) + rng.randrange(10001).to_bytes(2, "big")
    body += bytes([rng.randrange(101)]) + (b"\x00\x01\x00" if model == "T201" else b"\x00\x01")
    return Frame(address=address, name=model, manufacturer={0xAA55: body})


def smartdry_frame(rng: random.Random) -> Frame:
    body = struct.pack("<ff", rng.uniform(-20, 100), rng.uniform(0, 100))
    body += rng.randrange(65536).to_bytes(2, "little") + bytes([rng.randrange(256), rng.randrange(256)])
    return Frame(address=random_address(rng), manufacturer={0x01AE: body})


def beewi_frame(rng: random.Random) -> Frame:
    body = b"\x08\x0c" + bytes([rng.randrange(256), rng.randrange(256), rng.randrange(101)])
    return Frame(address=random_address(rng), name="BSDOO", manufacturer={0x000D: body})


FAMILIES = [
    Family("Oria", "theengsdecoder 2.5.0", oria_frame, theengs_oracle(models={"T201", "T301"})),
    Family("SmartDry", "theengsdecoder 2.5.0", smartdry_frame, theengs_oracle(models={"SDLS"})),
    Family("BeeWi door", "theengsdecoder 2.5.0", beewi_frame, theengs_oracle(models={"BSDOO"})),
]
