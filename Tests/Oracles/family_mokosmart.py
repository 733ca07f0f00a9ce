"""MOKO (Mokosmart) beacons (Theengs `Mokobeacon_json.h`, `MBXPRO_json.h`).

MOKO beacon, service data 0xFF01, 13 bytes: battery %, 6 bytes, acceleration x, y, z int16 BE
in 0.1 mg. BeaconX Pro, service data 0xFEAB, big-endian, byte 0 the frame type: 0x40 device
info (bytes 3–4 battery mV; 5–20 bytes here), 0x60 accelerometer (21 bytes: 6–11 x, y, z int16
in 0.1 mg, 12–13 battery mV), 0x70 temperature-humidity (16 bytes: 3–4 temperature int16 × 0.1
°C, 5–6 humidity u16 × 0.1 %, 7–8 battery mV). Theengs gives the axes in m/s² (`x_axis`…):
compared in g (÷ 9.80665), as the vector tests do."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import as_unsigned, theengs_oracle


def rand(rng: random.Random, n: int) -> bytes:
    return bytes(rng.randrange(256) for _ in range(n))


def moko_frame(rng: random.Random) -> Frame:
    kind = rng.choice(["ff01", 0x40, 0x60, 0x70])
    if kind == "ff01":
        return Frame(address=random_address(rng), service={"ff01": bytes([rng.randrange(101)]) + rand(rng, 12)})
    if kind == 0x40:
        body = bytes([0x40]) + rand(rng, rng.randrange(4, 20))
    elif kind == 0x60:
        body = bytes([0x60]) + rand(rng, 20)
    else:
        body = bytes([0x70]) + rand(rng, 15)
    return Frame(address=random_address(rng), service={"feab": body})


G = 9.80665
CONVERT = {k: (lambda v, out: v / G) for k in ("x_axis", "y_axis", "z_axis")}
# Theengs reads the u16 battery millivolts as int16 (≥ 32.768 V comes out negative): compared
# as its value + 65.536 V there (docs/parsers.md, Oracle lane).
CONVERT["volt"] = as_unsigned(16, 0.001)

FAMILIES = [Family("Mokosmart", "theengsdecoder 2.5.0", moko_frame,
                   theengs_oracle(convert=CONVERT, models={"Mokobeacon", "MBXPRO"}))]
