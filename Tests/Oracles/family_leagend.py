"""Leagend battery monitors (Theengs `BM2_json.h`, `BM6_json.h`): an iBeacon frame (0x004C,
`02 15`, 23 bytes) with the model's fixed proximity UUID. BM2: the power byte (byte 22) is the
battery %; BM6: the major's low byte (byte 19). The other bytes random; battery 0–100, one
frame in five any byte."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import as_unsigned, theengs_oracle

BM2_UUID = bytes.fromhex("655f83caae16a10a702e31f30d58dd82")
BM6_UUID = bytes.fromhex("3ba29cd9a42c894856badaf2606ef777")


def leagend_frame(rng: random.Random) -> Frame:
    battery = rng.randrange(101) if rng.random() < 0.8 else rng.randrange(256)
    body = bytearray(b"\x02\x15" + (BM2_UUID if rng.random() < 0.5 else BM6_UUID))
    body += bytes(rng.randrange(256) for _ in range(5))
    body[22 if body[2:18] == BM2_UUID else 19] = battery
    name = "BM2 Battery Monitor" if body[2:18] == BM2_UUID else "BM6 Battery Monitor"
    return Frame(address=random_address(rng), name=name, manufacturer={0x004C: bytes(body)})


FAMILIES = [Family("Leagend BM2/BM6", "theengsdecoder 2.5.0", leagend_frame,
                   theengs_oracle(ignore={"device"}, convert={"batt": as_unsigned(8, 1)}, models={"BM2", "BM6"}))]
