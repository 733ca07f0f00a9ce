"""ThermoBeacon WS02 / WS08 (Theengs `ThermoBeacon_json.h`) and the generic BLE tyre-pressure
sensors (Theengs `TPMS_json.h`), both manufacturer data with the sender's address inside.

ThermoBeacon: company id 0x0010 / 0x0011 / 0x0015 / 0x0018 / 0x001B (varies with the model),
two bytes, the address reversed (6), then 18-byte frame: voltage u16 LE mV, temperature int16
LE / 16 °C, humidity int16 LE / 16 %, uptime u32 LE s; or 20-byte frame: maximum temperature
int16 LE / 16 °C and its uptime u32 LE, the same for the minimum.
TPMS: company id 0x0100, 16 bytes: the sensor's address (6; the low nibble of its first byte is
the wheel, 0 → tyre 1), pressure u32 LE Pa (bar), temperature int32 LE × 0.01 °C, battery %,
status (bit 0 alarm)."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle

THERMOBEACON_IDS = [0x0010, 0x0011, 0x0015, 0x0018, 0x001B]


def thermobeacon_frame(rng: random.Random) -> Frame:
    address = random_address(rng)
    mac = bytes.fromhex(address.replace(":", ""))
    body = bytes([0, 0]) + mac[::-1]
    if rng.random() < 0.5:
        body += rng.randrange(65536).to_bytes(2, "little")
        body += rng.randrange(-32768, 32768).to_bytes(2, "little", signed=True)
        body += rng.randrange(-32768, 32768).to_bytes(2, "little", signed=True)
        body += rng.randrange(2**32).to_bytes(4, "little")
    else:
        for _ in range(2):
            body += rng.randrange(-32768, 32768).to_bytes(2, "little", signed=True)
            body += rng.randrange(2**32).to_bytes(4, "little")
    return Frame(address=address, manufacturer={rng.choice(THERMOBEACON_IDS): body})


def tpms_frame(rng: random.Random) -> Frame:
    sensor = bytes([0x80 | rng.randrange(4), 0xEA, 0xCA]) + bytes(rng.randrange(256) for _ in range(3))
    address = ":".join(f"{b:02X}" for b in sensor)
    body = sensor + rng.randrange(2**32).to_bytes(4, "little")
    body += rng.randrange(-2**31, 2**31).to_bytes(4, "little", signed=True)
    body += bytes([rng.randrange(101), rng.randrange(256)])
    return Frame(address=address, manufacturer={0x0100: body})


THERMOBEACON = {"time": "uptime", "tempc_max": "temperature_max", "time_max": "temperature_max_time",
                "tempc_min": "temperature_min", "time_min": "temperature_min_time", "mac": None}

def narrowed(base, key: str, wrong):
    """`base` without its `key` value where `wrong(value)`: the oracle misreads the field there
    (reasons in docs/parsers.md, Oracle lane)."""
    def run(frame: Frame) -> dict | None:
        values = base(frame)
        if values and isinstance(values.get(key), (int, float)) and wrong(values[key]):
            del values[key]
        return values
    return run


FAMILIES = [
    # Theengs reads the u16 millivolts as int16 (≥ 32.768 V comes out negative): left out there.
    Family("ThermoBeacon", "theengsdecoder 2.5.0", thermobeacon_frame,
           narrowed(theengs_oracle(rename=THERMOBEACON, models={"WS02/WS08"}), "voltage", lambda v: v < 0)),
    # Theengs reads the int32 temperature unsigned (below 0 °C it reports 42 949 672.96 less the
    # value): left out where the raw value has its sign bit set (Theengs ≥ 21 474 836.48).
    Family("TPMS", "theengsdecoder 2.5.0", tpms_frame,
           narrowed(theengs_oracle(rename={"mac": None}, models={"TPMS"}), "temperature", lambda v: v >= 2**31 / 100)),
]
