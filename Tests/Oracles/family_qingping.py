"""Qingping (ClearGrass) service data 0xFDCD (oracle: qingping-ble).

Byte 0 flags (bit 6: event frame), byte 1 device id, bytes 2–7 the MAC reversed, then objects
`id, length, value`. Each model sends the objects it has (qingping-ble, pvvx's TLB2Z, Theengs).
"""
from __future__ import annotations

import random

from families import Family, Frame, device_data_oracle, random_address

TEMP_HUM = (0x01, 0x02)
# Device id → (name, the objects its periodic frames carry).
QINGPING_DEVICES = {
    0x01: ("Qingping Temp RH M", TEMP_HUM), 0x07: ("Qingping Temp RH M", TEMP_HUM),
    0x16: ("Qingping Temp RH M", TEMP_HUM), 0x4F: ("Qingping Temp RH M", TEMP_HUM),  # CGG1, CGG3
    0x10: ("Qingping Temp RH Lite", TEMP_HUM),  # CGDK2
    0x0F: ("Qingping Thermo-Hygrometer", TEMP_HUM),  # CGM1
    0x15: ("Qingping Temp RH Pro E", TEMP_HUM),  # CGF1W
    0x09: ("Qingping Temp RH Barometer", TEMP_HUM + (0x07,)),  # CGP1W
    0x18: ("Qingping Temp RH Pro", TEMP_HUM + (0x07,)),  # CGP23W
    0x0C: ("Qingping Alarm Clock", TEMP_HUM), 0x1E: ("Qingping BT Clock Lite", TEMP_HUM),  # CGD1, CGC1
    0x0E: ("Qingping Air Monitor Lite", (0x01, 0x12, 0x13)), 0x24: ("Qingping Air Monitor Lite", (0x01, 0x12, 0x13)),
    0x33: ("Qingping CO2 Temp RH", (0x01, 0x13, 0x02)), 0x5D: ("Qingping CO2 Temp RH", (0x01, 0x13, 0x02)),
    0x04: ("Qingping Door/Window Sensor", (0x04, 0x02, 0x0F)),  # CGH1
    0x12: ("Qingping Motion & Light", (0x08, 0x09, 0x11, 0x02, 0x0F)),  # CGPR1
}
CLOCKS = (0x0C, 0x1E)  # CGD1, CGC1: battery byte with bit 7 set now and then (Theengs masks it)


def qingping_object(rng: random.Random, oid: int, device: int) -> bytes:
    if oid == 0x01:
        value = (rng.randrange(-32768, 32768).to_bytes(2, "little", signed=True)
                 + rng.randrange(1001).to_bytes(2, "little"))
    elif oid == 0x02:
        battery = 0xFF if rng.random() < 0.05 else rng.randrange(101)
        if device in CLOCKS and battery <= 100 and rng.random() < 0.5:
            battery |= 0x80
        value = bytes([battery])
    elif oid == 0x04:
        value = bytes([rng.randrange(3)])
    elif oid == 0x07:
        value = rng.randrange(65536).to_bytes(2, "little")
    elif oid == 0x08:
        value = bytes([rng.randrange(2)]) + rng.randrange(1 << 24).to_bytes(3, "little")
    elif oid == 0x09:
        value = rng.randrange(1 << 32).to_bytes(4, "little")
    elif oid == 0x0F:
        value = bytes([rng.randrange(256)])
    elif oid == 0x11:
        value = bytes([rng.randrange(2)])
    elif oid == 0x12:
        value = rng.randrange(1000).to_bytes(2, "little") + rng.randrange(1000).to_bytes(2, "little")
    elif oid == 0x13:
        value = rng.randrange(65536).to_bytes(2, "little")
    else:
        raise ValueError(oid)
    return bytes([oid, len(value)]) + value


def qingping_frame(rng: random.Random) -> Frame:
    address = random_address(rng)
    device = rng.choice(list(QINGPING_DEVICES))
    name, objects = QINGPING_DEVICES[device]
    event = device in (0x04, 0x12) and rng.random() < 0.4
    if device == 0x04:
        chosen = [0x04, 0x02] if event else [0x0F, 0x02]
        if not event and rng.random() < 0.5:
            chosen = [0x0F, 0x0F, 0x02]  # CGH1 periodic: packet counter, door state (Theengs)
    elif device == 0x12:
        chosen = [0x08] if event else rng.sample([0x08, 0x09, 0x11, 0x02], rng.randint(1, 3))
        if not event and 0x08 in chosen and 0x09 in chosen:
            chosen.remove(0x09)  # one illuminance per frame
        if not event and rng.random() < 0.5:
            chosen.append(0x0F)  # packet counter
    else:
        # Every frame of these models carries temperature and humidity (01); the others now and then.
        rest = [o for o in objects if o != 0x01]
        chosen = [0x01] + (rest if rng.random() < 0.7 else rng.sample(rest, rng.randint(0, len(rest))))
    flags = 0x48 if event else rng.choice([0x08, 0x88])
    body = b"".join(qingping_object(rng, oid, device) for oid in chosen)
    mac = bytes.fromhex(address.replace(":", ""))[::-1]
    return Frame(address=address, name=name, service={"fdcd": bytes([flags, device]) + mac + body})


def qingping_oracle():
    from qingping_ble import QingpingBluetoothDeviceData
    run = device_data_oracle(QingpingBluetoothDeviceData, {
        "binary:door": "opening", "binary:(None, 'door_left_open')": "left_open", "binary:motion": "motion",
        "binary:light": "light", "carbon_dioxide": "co2",
    })

    def oracle(frame: Frame) -> dict | None:
        values = run(frame)
        # qingping-ble takes the CGC1/CGD1 battery byte whole, flag bit 7 included (→ 128–228 %);
        # Theengs and we mask it (docs/parsers.md, Oracle lane): such a battery is left out.
        if values and values.get("battery", 0) > 100:
            del values["battery"]
        return values

    return oracle


FAMILIES = [Family("Qingping", "qingping-ble", qingping_frame, qingping_oracle())]
