"""Aranet4 CO₂ monitor with Smart Home integration on (aranet4, the Aranet4-Python client):
manufacturer 0x0702, 22 bytes LE: flags (bit 5 integrations on) and firmware version, 3 bytes,
then CO₂ ppm u16 (bit 15 no value), temperature u16 × 0.05 °C (bit 14 no value), pressure u16
× 0.1 hPa (bit 15 no value), humidity % u8, battery % u8, status colour, interval u16, age u16,
counter u8. One value in ten of CO₂, temperature and pressure carries its no-value bit (the
rest random below it); humidity 0–100 %, battery 0–100 %. aranet4 rounds the temperature to
0.1 °C (the format carries 0.05 °C steps): compared within 0.05."""
from __future__ import annotations

import random

from families import Family, Frame, random_address


def aranet_frame(rng: random.Random) -> Frame:
    def field(flag: int) -> int:
        return rng.randrange(flag) | (flag if rng.random() < 0.1 else 0)

    body = bytes([0x20 | rng.choice([0x00, 0x01, 0x04, 0x08, 0x10, 0x12]), rng.randrange(10), rng.randrange(10),
                  1, rng.randrange(256), rng.randrange(256), rng.randrange(256), rng.randrange(256)])
    body += field(0x8000).to_bytes(2, "little") + field(0x4000).to_bytes(2, "little")
    body += field(0x8000).to_bytes(2, "little") + bytes([rng.randrange(101), rng.randrange(101), rng.randrange(4)])
    body += rng.choice([60, 120, 300, 600]).to_bytes(2, "little") + rng.randrange(600).to_bytes(2, "little")
    body += bytes([rng.randrange(256)])
    return Frame(address=random_address(rng), name=f"Aranet4 {rng.randrange(65536):04X}",
                 manufacturer={0x0702: body}, tolerances={"temperature": 0.051})


class _Device:
    def __init__(self, frame: Frame) -> None:
        self.name = frame.name
        self.address = frame.address


class _AdvertisementData:
    def __init__(self, frame: Frame) -> None:
        self.manufacturer_data = {k: bytes(v) for k, v in frame.manufacturer.items()}
        self.rssi = -60


def aranet_oracle(frame: Frame) -> dict | None:
    from aranet4.client import Aranet4Advertisement
    advertisement = Aranet4Advertisement(_Device(frame), _AdvertisementData(frame))
    readings = advertisement.readings
    if readings is None:
        return None

    def value(x):
        return None if x == -1 else x  # aranet4's "no value"

    return {"co2": value(readings.co2), "temperature": value(readings.temperature),
            "pressure": value(readings.pressure), "humidity": value(readings.humidity),
            "battery": readings.battery}


FAMILIES = [Family("Aranet4", "aranet4 2.6.0", aranet_frame, aranet_oracle)]
