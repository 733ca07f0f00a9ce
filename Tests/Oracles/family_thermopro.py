"""ThermoPro TP357/TP357S/TP358/TP359/TP393 hygrometers (oracle: thermopro-ble).

The readings start in the company-id field: `C2`, temperature int16 LE × 0.1 °C, humidity %,
battery (bits 0–1: 2 good, 1 or 0 low), then a byte or two; `FF FF FF` for no measurement.
thermopro-ble turns the battery bits into 1 / 50 / 100 %; we publish `battery_low` (bits < 2), so
the oracle's battery is compared as `battery_low` = (its percentage < 100).
"""
from __future__ import annotations

import random

from families import Family, Frame, device_data_oracle, random_address


def thermopro_frame(rng: random.Random) -> Frame:
    name = rng.choice(["TP357", "TP357S", "TP358", "TP359", "TP393"])
    if rng.random() < 0.1:
        temp_humidity = b"\xff\xff\xff"  # no measurement yet
    else:
        temp_humidity = rng.randrange(-32768, 32768).to_bytes(2, "little", signed=True) + bytes([rng.randrange(101)])
    battery = rng.randrange(256) if rng.random() < 0.2 else (rng.randrange(64) << 2) | rng.randrange(3)
    data = b"\xc2" + temp_humidity + bytes([battery]) + bytes(rng.randrange(256) for _ in range(rng.randint(1, 2)))
    company = int.from_bytes(data[:2], "little")
    return Frame(address=random_address(rng), name=name, manufacturer={company: data[2:]})


def thermopro_oracle():
    from thermopro_ble import ThermoProBluetoothDeviceData
    run = device_data_oracle(ThermoProBluetoothDeviceData)

    def oracle(frame: Frame) -> dict | None:
        values = run(frame)
        if values and "battery" in values:
            values["battery_low"] = values.pop("battery") < 100
        return values

    return oracle


FAMILIES = [Family("ThermoPro TP35x", "thermopro-ble", thermopro_frame, thermopro_oracle())]
