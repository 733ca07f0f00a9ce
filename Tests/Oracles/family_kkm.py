"""KKM K6P / K9 and BlueCharm KSensor sensor frames on the Eddystone UUID (Theengs `KKM_*`,
`BlueCharm_*`): service data 0xFEAA, `21 01 <layout>`, battery mV u16 BE, temperature 8.8 °C
int16 BE, then humidity 8.8 % u16 BE (layout 0x07, K6P), acceleration x/y/z int16 BE mG (0x0B,
KSensor), or both (0x0F, K9). Whole int16 temperature and acceleration, humidity 0–100 %,
battery 2.0–3.7 V. Theengs reports mG, compared in g."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def kkm_frame(rng: random.Random) -> Frame:
    layout = rng.choice([0x07, 0x0B, 0x0F])
    body = bytes([0x21, 0x01, layout]) + rng.randrange(2000, 3701).to_bytes(2, "big")
    body += rng.randrange(-32768, 32768).to_bytes(2, "big", signed=True)
    if layout != 0x0B:
        body += rng.randrange(25601).to_bytes(2, "big")
    if layout != 0x07:
        body += b"".join(rng.randrange(-32768, 32768).to_bytes(2, "big", signed=True) for _ in range(3))
    return Frame(address=random_address(rng), service={"feaa": body})


def milli_g(value, out):
    return value / 1000


FAMILIES = [Family("KKM / BlueCharm sensor", "theengsdecoder 2.5.0", kkm_frame,
                   theengs_oracle(convert={"accx": milli_g, "accy": milli_g, "accz": milli_g},
                                  models={"K6P", "K9", "KSensor"}))]
