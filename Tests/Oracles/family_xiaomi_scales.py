"""Xiaomi scales and the HHCCJCY10 plant sensor, outside MiBeacon (xiaomi-ble; Theengs too for
the HHCCJCY10).

Mi Smart Scale (XMTZC01HM/04HM), service data 0x181D, 10 bytes: control byte (bit 0 pounds,
bit 1 set, bit 4 catty, bit 5 stabilized, bit 6 object mode, bit 7 load removed), weight u16 LE
(kg × 200, lb × 100, jin × 100), date and time (random).
Mi Body Composition Scale (XMTZC02HM/05HM), service data 0x181B, 13 bytes: byte 0 (bit 0 pounds,
bit 1 set, bit 2 object mode), byte 1 (bit 1 impedance, bit 2 set, bit 5 stabilized, bit 6
catty, bit 7 removed), date and time, impedance u16 LE, weight u16 LE.
Every flag combination (catty one frame in ten, never with pounds), whole u16 weight (a tenth of
the frames 0, the empty scale) and impedance.
HHCCJCY10, service data 0xFD50, 9 bytes BE: moisture u8, temperature int16 × 0.1 °C, illuminance
u24, battery u8, conductivity u16 — whole fields, moisture and battery 0–100."""
from __future__ import annotations

import random

from families import Family, Frame, device_data_oracle, random_address
from theengs_oracle import theengs_oracle

XIAOMI_NAMES = {"mass_non_stabilized": "weight", "mass": "weight", "voltage": None}


def scale_flags(rng: random.Random) -> tuple[bool, bool]:
    catty = rng.random() < 0.1
    return catty, (not catty and rng.random() < 0.5)


def weight(rng: random.Random) -> bytes:
    return (0 if rng.random() < 0.1 else rng.randrange(65536)).to_bytes(2, "little")


def datetime_bytes(rng: random.Random) -> bytes:
    return rng.randrange(2020, 2030).to_bytes(2, "little") + bytes(
        [rng.randrange(1, 13), rng.randrange(1, 29), rng.randrange(24), rng.randrange(60), rng.randrange(60)])


def scale_frame(rng: random.Random) -> Frame:
    catty, pounds = scale_flags(rng)
    stable, removed, obj = rng.random() < 0.6, rng.random() < 0.2, rng.random() < 0.3
    if rng.random() < 0.5:
        control = 0x02 | pounds | catty << 4 | stable << 5 | obj << 6 | removed << 7
        return Frame(address=random_address(rng),
                     service={"181d": bytes([control]) + weight(rng) + datetime_bytes(rng)})
    impedance = rng.random() < 0.5
    units = 0x02 | pounds | obj << 2
    state = 0x04 | impedance << 1 | stable << 5 | catty << 6 | removed << 7
    body = bytes([units, state]) + datetime_bytes(rng) + rng.randrange(65536).to_bytes(2, "little") + weight(rng)
    return Frame(address=random_address(rng), service={"181b": body})


def scale_oracle():
    from xiaomi_ble import XiaomiBluetoothDeviceData
    return device_data_oracle(XiaomiBluetoothDeviceData, XIAOMI_NAMES)


def hhcc_frame(rng: random.Random) -> Frame:
    body = bytes([rng.randrange(101)]) + rng.randrange(-32768, 32768).to_bytes(2, "big", signed=True)
    body += rng.randrange(2**24).to_bytes(3, "big") + bytes([rng.randrange(101)])
    body += rng.randrange(65536).to_bytes(2, "big")
    return Frame(address=random_address(rng), service={"fd50": body})


def hhcc_xiaomi_oracle():
    from xiaomi_ble import XiaomiBluetoothDeviceData
    base = device_data_oracle(XiaomiBluetoothDeviceData, XIAOMI_NAMES)

    def run(frame: Frame) -> dict | None:
        values = base(frame)
        if values and values.get("temperature") is not None and values["temperature"] >= 3276.8:
            # xiaomi-ble unpacks the temperature as u16 (`>BH`); it is int16 (Theengs, and a plant
            # sensor outdoors goes below 0 °C): compared reinterpreted (exact; docs/parsers.md).
            values["temperature"] -= 6553.6
        return values

    return run


FAMILIES = [
    Family("Mi Scale v1/v2", "xiaomi-ble 1.21.2", scale_frame, scale_oracle()),
    Family("HHCCJCY10", "xiaomi-ble 1.21.2", hhcc_frame, hhcc_xiaomi_oracle()),
    Family("HHCCJCY10 (Theengs)", "theengsdecoder 2.5.0", hhcc_frame, theengs_oracle(models={"HHCCJCY10"})),
]
