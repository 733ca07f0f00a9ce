"""Mopeka Pro Check / Pro Check Universal / Lippert BottleCheck (mopeka-iot-ble): manufacturer
0x0059 (Nordic), 10 bytes, service UUID 0xFEE5 listed (mopeka-iot-ble requires it)."""
from __future__ import annotations

import random

from families import Family, Frame, device_data_oracle, random_address


def mopeka_frame(rng: random.Random) -> Frame:
    address = random_address(rng)
    mac = bytes.fromhex(address.replace(":", ""))
    echo = rng.randrange(0x4000) | (rng.randrange(4) << 14)
    body = bytes([rng.choice([0x03, 0x06, 0x0C]), rng.randrange(0x80),
                  rng.randrange(0x80) | (0x80 if rng.random() < 0.2 else 0)])
    body += echo.to_bytes(2, "little") + mac[3:6] + bytes([rng.randrange(256), rng.randrange(256)])
    return Frame(address=address, manufacturer={0x0059: body}, uuids=["fee5"],
                 tolerances={"tank_level": 0.1, "battery": 0.051})


def mopeka_oracle():
    from mopeka_iot_ble import MopekaIOTBluetoothDeviceData
    base = device_data_oracle(MopekaIOTBluetoothDeviceData, {
        "battery_voltage": "voltage", "binary:button_pressed": "sync_button",
        "reading_quality": None, "reading_quality_raw": "reading_quality",
        "tank_level": ("tank_level", 0.1),  # mm (truncated) → cm
    })

    def run(frame: Frame) -> dict | None:
        values = base(frame)
        if values is None:
            return None
        body = frame.manufacturer[0x0059]
        for key, raw in (("accelerometer_x", body[8]), ("accelerometer_y", body[9])):
            if raw >= 0x80 and key in values:
                # mopeka-iot-ble reads the tilt bytes unsigned; they are int8 (Theengs, and the
                # corpus vectors: −128, −18, −101): compared only where both readings coincide.
                del values[key]
        if values.get("tank_level") is None:
            # mopeka-iot-ble withholds the level at reading quality 0; we publish it with the quality.
            values.pop("tank_level", None)
        return values

    return run


FAMILIES = [Family("Mopeka Pro", "mopeka-iot-ble", mopeka_frame, mopeka_oracle())]
