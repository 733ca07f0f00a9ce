"""Tilt hydrometers (tilt-ble): an iBeacon (manufacturer 0x004C, `02 15`) with the colour's
proximity UUID; major = °F, minor = specific gravity × 1000 (Tilt Pro: minor ≥ 5000, then
tenths of °F and SG × 10000)."""
from __future__ import annotations

import random

from families import Family, Frame, device_data_oracle, random_address


def tilt_frame(rng: random.Random) -> Frame:
    color = rng.randint(1, 8)
    uuid = bytes([0xA4, 0x95, 0xBB, color << 4, 0xC5, 0xB1, 0x4B, 0x44, 0xB5, 0x12, 0x13, 0x70, 0xF0, 0x2D,
                  0x74, 0xDE])
    if rng.random() < 0.3:  # Tilt Pro
        major, minor = rng.randrange(0, 2121), rng.randrange(5000, 13000)
    else:
        major, minor = rng.randrange(0, 213), rng.randrange(0, 5000)
    body = bytes([0x02, 0x15]) + uuid + major.to_bytes(2, "big") + minor.to_bytes(2, "big")
    body += rng.randrange(-128, 128).to_bytes(1, "big", signed=True)
    return Frame(address=random_address(rng), manufacturer={0x004C: body})


def tilt_oracle():
    from tilt_ble import TiltBluetoothDeviceData
    base = device_data_oracle(TiltBluetoothDeviceData)

    def run(frame: Frame) -> dict | None:
        values = base(frame)
        if values is None:
            return None
        if "temperature" in values:  # tilt-ble reports °F
            values["temperature"] = (values["temperature"] - 32) * 5 / 9
        return values

    return run


FAMILIES = [Family("Tilt", "tilt-ble", tilt_frame, tilt_oracle())]
