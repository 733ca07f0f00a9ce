"""Sensirion BLE gadget frames, manufacturer id 0x06D5 (oracle: sensirion-ble).

`00`, sample type, 2-byte device id, raw words uint16 LE: type 04 (`T_RH_V3`, SHT3x) and 06
(SHT4x gadget) temperature, humidity; type 08 (MyCO2 / SCD4x gadget) temperature, humidity, CO₂
ppm. sensirion-ble rounds the type 04 and 08 temperature and humidity to 0.1 (we: 0.01), so those
compare within 0.05.
"""
from __future__ import annotations

import random

from families import Family, Frame, device_data_oracle, random_address


def sensirion_frame(rng: random.Random) -> Frame:
    sample = rng.choice([0x04, 0x06, 0x08])
    words = [rng.randrange(65536), rng.randrange(65536)]
    if sample == 0x08:
        words.append(rng.randrange(40001))  # SCD4x: 0–40 000 ppm
    payload = bytes([0, sample]) + bytes(rng.randrange(256) for _ in range(2))
    payload += b"".join(w.to_bytes(2, "little") for w in words)
    name = {0x04: "SHT3x Gadget", 0x06: "SHT40 Gadget", 0x08: "MyCO2"}[sample]
    frame = Frame(address=random_address(rng), name=name, manufacturer={0x06D5: payload})
    if sample != 0x06:
        frame.tolerances = {"temperature": 0.051, "humidity": 0.051}
    return frame


def sensirion_oracle():
    from sensirion_ble import SensirionBluetoothDeviceData
    return device_data_oracle(SensirionBluetoothDeviceData, {"carbon_dioxide": "co2"})


FAMILIES = [Family("Sensirion gadget", "sensirion-ble", sensirion_frame, sensirion_oracle())]
