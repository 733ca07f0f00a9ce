"""SwitchBot families of the oracle lane (oracle: PySwitchbot's `parse_advertisement_data`, given
bleak's BLEDevice and AdvertisementData built from the frame).

Service data 0xFD3D (older firmware 0x0D00): byte 0 bits 0–6 the model letter, byte 1 status,
byte 2 bits 0–6 battery %, the rest per model; the Outdoor Meter and the Blind Tilt carry their
state in manufacturer data 0x0969 (the MAC first). PySwitchbot's `data` keys are mapped to our
reading names; values it reports in another convention are converted (documented per key).
"""
from __future__ import annotations

import random

from families import Family, Frame, random_address, uuid128


def temperature_bytes(rng: random.Random) -> bytes:
    """SwitchBot's temperature and humidity: tenths (bits 0–3), whole degrees (bits 0–6) with bit 7
    set for ≥ 0 °C, humidity % (bits 0–6; bit 7 is the display unit flag)."""
    return bytes([rng.randrange(10), rng.randrange(128) | (0x80 if rng.random() < 0.8 else 0),
                  rng.randrange(101) | (0x80 if rng.random() < 0.3 else 0)])


def switchbot_frame(rng: random.Random) -> Frame:
    address = random_address(rng)
    mac = bytes.fromhex(address.replace(":", ""))
    battery = rng.randrange(101) | (0x80 if rng.random() < 0.2 else 0)  # bit 7: "update utc" flag
    uuid = "fd3d"
    model = rng.choice(["meter", "meter_plus", "outdoor", "bot", "curtain", "curtain3", "motion", "contact",
                        "blind_tilt"])
    name = None
    manufacturer: dict[int, bytes] = {}
    if model in ("meter", "meter_plus"):
        letter = "T" if model == "meter" else "i"
        service = bytes([ord(letter), rng.randrange(256), battery]) + temperature_bytes(rng)
        name = rng.choice([None, "WoSensorTH"]) if model == "meter" else None
    elif model == "outdoor":
        service = bytes([ord("w"), 0, battery])
        manufacturer = {0x0969: mac + bytes([rng.randrange(256), rng.randrange(256)]) + temperature_bytes(rng)
                        + bytes([rng.randrange(256)])}
        name = rng.choice([None, "WoIOSensorTH"])
    elif model == "bot":
        service = bytes([ord("H"), rng.randrange(256), battery])
    elif model in ("curtain", "curtain3"):
        letter = "c" if model == "curtain" else "{"
        position = rng.randrange(101) | (0x80 if rng.random() < 0.3 else 0)
        light = (rng.randrange(1, 11) << 4) | rng.randrange(8)
        service = bytes([ord(letter), rng.randrange(256), battery, position, light])
        if model == "curtain" and rng.random() < 0.1:
            uuid = "0d00"  # older firmware: 0x0D00, 5 bytes
        else:
            service += bytes([rng.randrange(256)])
    elif model == "motion":
        service = bytes([ord("s"), rng.randrange(256), battery, rng.randrange(256), rng.randrange(256),
                         rng.randrange(256)])
    elif model == "contact":
        service = bytes([ord("d"), rng.randrange(256), battery]) + bytes(rng.randrange(256) for _ in range(6))
    else:  # blind tilt
        service = bytes([ord("x"), rng.randrange(256), battery])
        tilt = rng.randrange(101) | (0x80 if rng.random() < 0.3 else 0)
        manufacturer = {0x0969: mac + bytes([rng.randrange(256), (rng.randrange(1, 11) << 4) | rng.randrange(16),
                                             tilt, rng.randrange(256)])}
    return Frame(address=address, name=name, service={uuid: service}, manufacturer=manufacturer)


def bool_reading(value):
    return None if value is None else bool(value)


def switchbot_oracle():
    from bleak.backends.device import BLEDevice
    from bleak.backends.scanner import AdvertisementData
    from switchbot.adv_parser import parse_advertisement_data

    def run(frame: Frame) -> dict | None:
        device = BLEDevice(frame.address, frame.name, None)
        service = {uuid128(k): bytes(v) for k, v in frame.service.items()}
        for uuid, value in service.items():
            if len(value) == 5 and value[0] & 0x7F == ord("c"):
                # The Curtain's 5-byte service data (older firmware, the layout SwitchBot's
                # curtain.md documents): PySwitchbot needs 6 bytes though it reads only bytes 0–4,
                # so it gets a zero byte appended; only its length check is not compared
                # (docs/parsers.md, Oracle lane).
                service[uuid] = value + b"\x00"
        advertisement = AdvertisementData(
            local_name=frame.name, manufacturer_data={k: bytes(v) for k, v in frame.manufacturer.items()},
            service_data=service,
            service_uuids=[uuid128(k) for k in frame.service], tx_power=None, rssi=-60, platform_data=())
        parsed = parse_advertisement_data(device, advertisement)
        if parsed is None or not parsed.data.get("data"):
            return None
        model, data = parsed.data["model"], parsed.data["data"]
        out: dict = {"battery": data.get("battery")}
        if model in ("T", "i", "w"):
            out.update(temperature=data["temperature"], humidity=data["humidity"])
        elif model == "H":
            out["mode"] = "on/off" if data["switchMode"] else "onestate"
            if data["switchMode"]:
                # PySwitchbot reports a press-mode Bot as off by design (no state); compared only in
                # switch mode.
                out["state"] = "on" if data["isOn"] else "off"
        elif model in ("c", "{"):
            # PySwitchbot inverts the position (Home Assistant: 100 = open); we publish the byte.
            out.update(position=100 - data["position"], moving=data["inMotion"], calibrated=data["calibration"],
                       light_level=data["lightLevel"])
        elif model == "s":
            distances = {0: "long", 1: "middle", 2: "short"}
            out.update(motion=data["motion_detected"], scope_tested=data["tested"], led=bool_reading(data["led"]),
                       sensing_distance=distances.get(data["sense_distance"]),
                       light_level="bright" if data["is_light"] else "dark")
        elif model == "d":
            contact = ("timeout not closed" if data["contact_timeout"] else "open" if data["contact_open"]
                       else "closed")
            out.update(contact=contact, motion=data["motion_detected"], scope_tested=data["tested"],
                       light_level="bright" if data["is_light"] else "dark", push_count=data["button_count"])
        elif model == "x":
            # PySwitchbot reports the raw tilt position p (50 = open); we publish open % and direction.
            p = data["tilt"]
            out.update(tilt=100 - abs(2 * p - 100), tilt_direction="up" if p > 50 else "down" if p < 50 else "—",
                       moving=data["inMotion"], calibrated=data["calibration"])
            # Not compared: the light level. PySwitchbot reads it from the high nibble of byte 9 of
            # the manufacturer data, Theengs and we from byte 7; no vendor page documents the Blind
            # Tilt's advertisement (docs/parsers.md, Oracle lane).
        else:
            return None
        if out["battery"] is None:
            del out["battery"]
        return out

    return run


FAMILIES = [Family("SwitchBot", "PySwitchbot", switchbot_frame, switchbot_oracle())]
