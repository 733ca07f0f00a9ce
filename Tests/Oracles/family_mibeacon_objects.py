"""MiBeacon objects beyond the classic sensor ones (xiaomi-ble): events, buttons, remotes,
the dimmer and cube, locks and fingerprint readers, door sensors, toothbrushes, thermometers,
scales, presence, leak and smoke detectors, the Smart Band — each object sent by a product id
that sends it (xiaomi-ble `devices.py`), with its values over the object's range (Xiaomi's
object definition as xiaomi-ble `parser.py` implements it). One object per frame, MiBeacon v5
with the MAC; a quarter of the frames AES-CCM encrypted with a random bind key (as newer devices
send them). xiaomi-ble's events (button, lock, fingerprint, error, motion, dimmer, cube) are
compared under our reading names; the dimmer's event property (presses, seconds or steps) too."""
from __future__ import annotations

import random
import struct

from families import Family, Frame, device_data_oracle, mibeacon_seal, random_address


def u8(n: int) -> bytes:
    return bytes([n])


def u16(n: int) -> bytes:
    return n.to_bytes(2, "little")


def u32(n: int) -> bytes:
    return n.to_bytes(4, "little")


def f32(x: float) -> bytes:
    return struct.pack("<f", x)


def lock_key(rng: random.Random) -> int:
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice([0, 0xFFFFFFFF, 0xDEADBEEF])
    if kind == 1:
        return rng.randrange(0x80000000)
    if kind == 2:
        return 0x80010000 + rng.randrange(8 << 16)  # fingerprint … palm print key ids
    if kind == 3:
        return 0xC0DE0000 + rng.choice(list(range(0x11)) + list(range(0x1000, 0x1006)))
    if kind == 4:
        return rng.randrange(0x80090000, 0xC0DE0000)
    return rng.randrange(2**32)


def lock_object(rng: random.Random) -> bytes:
    action = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 0xF])
    method = rng.choice(list(range(12)) + [0xF])
    return u8(method << 4 | action) + u32(lock_key(rng)) + u32(rng.randrange(2**32))


def no_motion_seconds(rng: random.Random) -> int:
    return rng.choice([rng.randrange(31), rng.choice([60, 120, 300, 600, 1200, 1800]), rng.randrange(65536)])


def fingerprint(rng: random.Random) -> bytes:
    return u32(rng.choice([0, 0xFFFFFFFF, 0xDEADBEEF, rng.randrange(2**32)])) + u8(rng.randrange(8))


def button_1001(ids: int, presses: list[int]):
    return lambda rng: bytes([rng.randrange(ids), 0, rng.choice(presses)])


def dimmer(rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:
        return bytes([0, rng.randrange(1, 256), 3])  # press, value = number of presses
    if kind == 1:
        return bytes([1, rng.randrange(1, 256), 3])  # long press, value = seconds
    if kind == 2:
        return bytes([0, rng.randrange(1, 256), 4])  # rotation by value (int8)
    return bytes([rng.randrange(1, 256), 0, 4])  # rotation while pressed, by the id (int8)


def s400(rng: random.Random) -> bytes:
    kind = rng.randrange(5)
    mass, heart, impedance = rng.randrange(1, 0x7FF), rng.randrange(1, 127), rng.randrange(1, 1 << 14)
    if kind == 0:
        packed = mass | heart << 11 | impedance << 18  # weight + heart rate + 50 kHz impedance
    elif kind == 1:
        packed = impedance << 18  # the final 250 kHz impedance
    elif kind == 2:
        packed = mass | rng.choice([0, heart]) << 11  # weight only (with socks)
    elif kind == 3:
        packed = 0  # stepped off
    else:
        packed = 0x7FF | rng.choice([0, heart]) << 11 | impedance << 18  # S400 Pro: no weight
    return u8(rng.randrange(256)) + u32(packed) + u32(rng.randrange(2**32))


# (product id, object id, value generator): what each product sends.
OBJECTS = [
    (0x03DD, 0x0003, lambda rng: u8(1)),  # MUE4094RT motion (never sends clear)
    (0x069E, 0x0006, fingerprint), (0x11C2, 0x0006, fingerprint),  # ZNMS16LM, Lockin-SV40
    (0x11C2, 0x0007, lambda rng: u8(rng.randrange(6))), (0x0E39, 0x0007, lambda rng: u8(rng.randrange(6))),
    (0x11C2, 0x0008, lambda rng: u8(rng.randrange(2))), (0x0380, 0x0008, lambda rng: u8(rng.randrange(2))),
    (0x069E, 0x000B, lock_object), (0x069F, 0x000B, lock_object), (0x0380, 0x000B, lock_object),
    (0x11C2, 0x000B, lock_object), (0x0E39, 0x000B, lock_object),
    (0x0391, 0x000A, lambda rng: rng.randrange(-32768, 32768).to_bytes(2, "little", signed=True)),  # MMC-W505
    (0x07F6, 0x000F, lambda rng: rng.choice([1, 100, rng.randrange(2**24)]).to_bytes(3, "little")),  # MJYD02YL
    (0x0A8D, 0x000F, lambda rng: rng.choice([0, 256, rng.randrange(2**24)]).to_bytes(3, "little")),  # RTCGQ02LM
    (0x0A83, 0x000F, lambda rng: rng.randrange(2**24).to_bytes(3, "little")),  # CGPR1
    (0x0489, 0x0010, lambda rng: bytes([rng.choice([0, rng.randrange(1, 256)])])
        + (u8(rng.randrange(256)) if rng.random() < 0.7 else b"")),  # M1S-T500
    (0x0A8D, 0x1001, button_1001(1, [0, 1, 2])), (0x07BF, 0x1001, button_1001(1, [0, 1, 2])),
    (0x0997, 0x1001, button_1001(1, [0, 1, 2])), (0x0863, 0x1001, button_1001(1, [0, 1, 2])),
    (0x04E1, 0x1001, lambda rng: bytes([rng.randrange(2), rng.randrange(256), 0])),  # XMMF01JQD cube
    (0x0153, 0x1001, button_1001(6, [0, 1, 2])), (0x068E, 0x1001, button_1001(6, [0, 1, 2])),
    (0x04E6, 0x1001, button_1001(6, [0, 1, 2])), (0x03BF, 0x1001, button_1001(9, [0, 1, 2])),
    (0x03B6, 0x1001, dimmer),  # YLKG07YL/YLKG08YL
    (0x1568, 0x1001, button_1001(1, [0, 1, 2])), (0x1569, 0x1001, button_1001(3, [0, 1, 2])),
    (0x0DFD, 0x1001, button_1001(7, [0, 1, 2])),  # K9B 1/2/3 buttons
    (0x0083, 0x1005, lambda rng: bytes([rng.randrange(2), rng.randrange(101)])),  # YM-K1501 kettle
    (0x07F6, 0x1007, lambda rng: rng.choice([0, 100]).to_bytes(3, "little")),  # MJYD02YL light
    (0x098B, 0x1007, lambda rng: rng.choice([0, 100]).to_bytes(3, "little")),  # MCCGQ02HL light
    # 0x1007 as lux: the plant sensors HHCCJCY01 and GCLS002 (the CGPR1 sends its lux in 0x000F,
    # not 0x1007: xiaomi-ble issue #4).
    (0x0098, 0x1007, lambda rng: rng.randrange(2**24).to_bytes(3, "little")),
    (0x03BC, 0x1007, lambda rng: rng.randrange(2**24).to_bytes(3, "little")),
    (0x0380, 0x100E, lambda rng: u8(rng.randrange(16) | (rng.randrange(16) << 4 if rng.random() < 0.2 else 0))),
    # DSL-C08 lock attribute: bits 0–3, bits 4–7 reserved (set in a fifth of the frames)
    (0x040A, 0x1012, lambda rng: u8(rng.randrange(2))), (0x040A, 0x1013, lambda rng: u8(rng.randrange(101))),
    (0x0863, 0x1014, lambda rng: u8(rng.randrange(2))), (0x0997, 0x1015, lambda rng: u8(rng.randrange(2))),
    (0x0A8D, 0x1017, lambda rng: u32(no_motion_seconds(rng))),
    (0x0A83, 0x1017, lambda rng: u32(no_motion_seconds(rng))),
    (0x07F6, 0x1017, lambda rng: u32(no_motion_seconds(rng))),
    (0x07F6, 0x1018, lambda rng: u8(rng.randrange(2))), (0x0A8D, 0x1018, lambda rng: u8(rng.randrange(2))),
    (0x098B, 0x1019, lambda rng: u8(rng.randrange(4))),  # MCCGQ02HL
    (0x0A8D, 0x101B, lambda rng: u32(rng.randrange(2**32))),
    (0x00DB, 0x2000, lambda rng: u16(rng.randrange(3000, 4200)) + u16(rng.randrange(3000, 4200))
        + u8(rng.randrange(101))),  # MMC-T201-1
    (0x0806, 0x3003, lambda rng: u8(rng.randrange(2)) + (u32(rng.randrange(2**32)) + u8(rng.randrange(101))
                                                         if rng.random() < 0.5 else b"")),  # T700
    (0x55B5, 0x4801, lambda rng: f32(rng.uniform(-40, 60))), (0x55B5, 0x4802, lambda rng: u8(rng.randrange(101))),
    (0x55B5, 0x4803, lambda rng: u8(rng.randrange(101))), (0x55B5, 0x4808, lambda rng: f32(rng.uniform(0, 100))),
    (0x520B, 0x4C01, lambda rng: f32(rng.uniform(-40, 60))), (0x520B, 0x4C02, lambda rng: u8(rng.randrange(101))),
    (0x520B, 0x4C03, lambda rng: u8(rng.randrange(101))), (0x520B, 0x4C08, lambda rng: f32(rng.uniform(0, 100))),
    (0x1889, 0x4804, lambda rng: u8(rng.randrange(4))), (0x1889, 0x4A12, lambda rng: u8(rng.randrange(4))),
    (0x1889, 0x4A0F, lambda rng: u8(rng.randrange(2))), (0x1889, 0x4A1A, lambda rng: u8(rng.randrange(2))),
    (0x1889, 0x4A13, lambda rng: u8(rng.randrange(2))),  # MS1BB(MI)
    (0x4683, 0x4805, lambda rng: f32(rng.uniform(0, 100000))), (0x2AEB, 0x4805, lambda rng: f32(rng.uniform(0, 2000))),
    (0x3F0F, 0x4806, lambda rng: u8(rng.randrange(2))), (0x6375, 0x4806, lambda rng: u8(rng.randrange(2))),
    (0x6375, 0x487B, lambda rng: u8(rng.randrange(2))), (0x6375, 0x4A68, lambda rng: u8(rng.randrange(4))),
    (0x78D1, 0x480C, lambda rng: u8(rng.randrange(2))),  # MC-COMM door
    (0x2AEB, 0x4818, lambda rng: u16(no_motion_seconds(rng))),
    (0x3531, 0x4818, lambda rng: u16(no_motion_seconds(rng))),
    (0x3F4C, 0x483C, lambda rng: u8(rng.randrange(2))), (0x3F4C, 0x483D, lambda rng: u32(rng.randrange(2**32))),
    (0x3F4C, 0x483E, lambda rng: u32(rng.randrange(2**32))),  # PS1BB
    (0x4683, 0x484E, lambda rng: u8(rng.randrange(3))), (0x50FB, 0x484E, lambda rng: u8(rng.randrange(2))),
    (0x6A0F, 0x484E, lambda rng: u8(rng.randrange(2))),
    (0x4683, 0x4851, lambda rng: u8(rng.randrange(256))), (0x4683, 0x4852, lambda rng: u8(rng.randrange(256))),
    (0x2AEB, 0x4A08, lambda rng: f32(rng.uniform(0, 2000))), (0x3531, 0x4A08, lambda rng: f32(rng.uniform(0, 2000))),
    (0x5968, 0x4A0C, lambda rng: u8(rng.randrange(2))), (0x5968, 0x4A0D, lambda rng: u8(rng.randrange(2))),
    (0x5968, 0x4A0E, lambda rng: u8(rng.randrange(2))),  # XMWS01XS: 0 left, 1 right
    (0x1949, 0x4E0C, lambda rng: u8(rng.randrange(1, 4))), (0x1949, 0x4E0D, lambda rng: u8(rng.randrange(1, 4))),
    (0x1949, 0x4E0E, lambda rng: u8(rng.randrange(1, 4))),  # XMWXKG01YL: 1 left, 2 right, 3 both
    (0x2387, 0x4E0C, lambda rng: u8(rng.randrange(256))), (0x2387, 0x4E0D, lambda rng: u8(rng.randrange(256))),
    (0x2387, 0x4E0E, lambda rng: u8(rng.randrange(256))),  # XMWXKG01LM
    (0x1C10, 0x4E0C, lambda rng: u8(rng.choice([1, 8, 15]))),  # K9BB-1BTN
    (0x45C9, 0x4E16, lambda rng: u8(rng.randrange(256)) + u32(rng.choice([0, rng.randrange(1, 20001)]))
        + u32(rng.randrange(2**32))),  # S200
    (0x50FB, 0x5003, lambda rng: u8(rng.randrange(101))), (0x6A0F, 0x5413, lambda rng: u8(rng.randrange(2))),
    (0x59FB, 0x5422, lambda rng: u8(rng.randrange(4))), (0x59FB, 0x5810, lambda rng: u8(rng.randrange(2))),
    (0x59FB, 0x6461, lambda rng: u8(rng.randrange(2))),  # Smart Band 10
    (0x3A61, 0x560C, lambda rng: u8(rng.randrange(1, 5))), (0x3A61, 0x560D, lambda rng: u8(rng.randrange(1, 5))),
    (0x3E17, 0x560E, lambda rng: u8(rng.randrange(1, 5))),  # KS1 / KS1BP: buttons 1–4
    (0x520B, 0x560C, lambda rng: u8(0)), (0x520B, 0x560D, lambda rng: u8(0)), (0x520B, 0x560E, lambda rng: u8(0)),
    (0x30D9, 0x6E16, s400), (0x4B05, 0x6E16, s400),  # S400, S400 Pro
]


FLOAT_TEMPERATURE_HUMIDITY = {0x4801, 0x4808, 0x4C01, 0x4C08}


def mibeacon_objects_frame(rng: random.Random) -> Frame:
    address = random_address(rng)
    product, oid, make = rng.choice(OBJECTS)
    value = make(rng)
    obj = oid.to_bytes(2, "little") + bytes([len(value)]) + value
    counter = rng.randrange(256)
    if rng.random() < 0.25:
        key = bytes(rng.randrange(256) for _ in range(16))
        extended = bytes(rng.randrange(256) for _ in range(3))
    else:
        key = extended = None
    frame = seal(address, product, counter, obj, key, extended)
    if oid in FLOAT_TEMPERATURE_HUMIDITY:
        # xiaomi-ble rounds these float32 values to 0.1 (its sensor library); we keep 0.01.
        frame.tolerances = {"temperature": 0.051, "humidity": 0.051}
    return frame


def seal(address: str, product: int, counter: int, obj: bytes, key: bytes | None, extended: bytes | None) -> Frame:
    """A MiBeacon v5 frame with the MAC and one object, AES-CCM encrypted when `key` is given."""
    frame = mibeacon_seal(address, 5, product, counter, obj, key, extended)
    frame.parts = (product, counter, obj, key, extended)  # for the oracle's lock-error narrowing
    return frame


NAMES = {
    "voltage": None,  # xiaomi-ble's estimate from the battery %, not on air
    "mass": "weight", "event:button": "button", "event:fingerprint": "fingerprint_result",
    "event:lock": "lock_action", "event:error": "lock_error", "event:motion": "motion_event",
}
DIMMER_PROPERTIES = {"number_of_presses": "dimmer_presses", "duration": "dimmer_duration", "steps": "dimmer_steps"}


def mibeacon_objects_oracle():
    from xiaomi_ble import XiaomiBluetoothDeviceData

    def oracle(frame: Frame) -> dict | None:
        def cls():
            return XiaomiBluetoothDeviceData(bindkey=frame.bindkey) if frame.bindkey else XiaomiBluetoothDeviceData()
        return device_data_oracle(cls, NAMES)(frame)

    def run(frame: Frame) -> dict | None:
        def cls():
            return XiaomiBluetoothDeviceData(bindkey=frame.bindkey) if frame.bindkey else XiaomiBluetoothDeviceData()

        try:
            values = device_data_oracle(cls, NAMES)(frame)
        except UnboundLocalError as error:
            values = lock_error_narrowed(frame, oracle)
            if values is None:
                return {"xiaomi_ble_raised": type(error).__name__}
        if values is None:
            return None
        if values.get("key_id") == str(0xDEADBEEF):
            # Fingerprint object 0x0006: xiaomi-ble compares the key id's bytes in written order
            # with DE AD BE EF, so 0xDEADBEEF (EF BE AD DE on air, little-endian as every MiBeacon
            # number and as its own lock object reads it) comes out as the number: compared as the
            # name it stands for (exact; docs/parsers.md, Oracle lane).
            values["key_id"] = "invalid operator"
        # The dimmer's event property, which device_data_oracle leaves out.
        if "dimmer" not in values:
            return values
        data = cls()
        update = data.update(_service_info(frame))
        for event in update.events.values():
            if event.device_key.key == "dimmer" and event.event_properties:
                for key, value in event.event_properties.items():
                    values[DIMMER_PROPERTIES.get(key, key)] = value
        return values

    return run


def lock_error_narrowed(frame: Frame, oracle) -> dict | None:
    """xiaomi-ble raises UnboundLocalError on a lock object 0x000B whose key id is an error code
    (0xC0DExxxx): it names no key then and reads the unset name. Narrowed (docs/parsers.md,
    Oracle lane): the same frame with key id 0 is decoded by xiaomi-ble (lock state, action and
    method come from the unchanged first byte), its `key_id` for that 0 is left out, and the error
    is named from xiaomi-ble's own table (`xiaomi_ble.locks.BLE_LOCK_ERROR`)."""
    from xiaomi_ble.locks import BLE_LOCK_ERROR
    product, counter, obj, key, extended = frame.parts
    if obj[:2] != b"\x0b\x00" or len(obj) != 12:
        return None
    error = BLE_LOCK_ERROR.get(int.from_bytes(obj[4:8], "little"))
    if error is None:
        return None
    values = oracle(seal(frame.address, product, counter, obj[:4] + bytes(4) + obj[8:], key, extended))
    if values is None:
        return None
    values.pop("key_id", None)
    values["lock_error"] = error
    return values


def _service_info(frame: Frame):
    from families import ServiceInfo
    return ServiceInfo(frame)


FAMILIES = [Family("MiBeacon objects", "xiaomi-ble 1.21.2", mibeacon_objects_frame, mibeacon_objects_oracle())]
