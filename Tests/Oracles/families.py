"""Families of the oracle lane: how to make a random valid frame, and which oracle decodes it.

Generators build frames from the formats' published layouts (the same facts docs/parsers.md
lists); the oracles are the PyPI parsers pinned in requirements.txt. Each oracle's output is
renamed to gattway's reading names and units here, so the comparison is by value.
"""
from __future__ import annotations

import datetime
import random
import time
from dataclasses import dataclass, field
from typing import Callable

BASE_UUID = "-0000-1000-8000-00805f9b34fb"


def uuid128(short: str) -> str:
    return short if len(short) > 8 else f"{int(short, 16):08x}{BASE_UUID}"


@dataclass
class Frame:
    address: str
    name: str | None = None
    manufacturer: dict[int, bytes] = field(default_factory=dict)
    service: dict[str, bytes] = field(default_factory=dict)
    uuids: list[str] = field(default_factory=list)
    bindkey: bytes | None = None
    # Wider tolerances for values the oracle rounds coarser than the format carries, by reading
    # name, set by the generator with the reason in docs/parsers.md (Oracle lane).
    tolerances: dict[str, float] = field(default_factory=dict)


class ServiceInfo:
    """The fields the Bluetooth-Devices parsers read from Home Assistant's BluetoothServiceInfo."""

    def __init__(self, frame: Frame) -> None:
        self.name = frame.name or ""
        self.address = frame.address
        self.rssi = -60
        self.manufacturer_data = {k: bytes(v) for k, v in frame.manufacturer.items()}
        self.service_data = {uuid128(k): bytes(v) for k, v in frame.service.items()}
        self.service_uuids = [uuid128(u) for u in frame.uuids] or list(self.service_data)
        self.source = "local"
        self.time = time.monotonic()
        self.tx_power = None
        self.connectable = True


@dataclass
class Family:
    name: str
    oracle_name: str
    generate: Callable[[random.Random], Frame]
    oracle: Callable[[Frame], dict | None]


def random_address(rng: random.Random) -> str:
    return ":".join(f"{rng.randrange(256):02X}" for _ in range(6))


def value_of(value):
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if hasattr(value, "value") and not isinstance(value, (int, float, str, bool)):
        return value.value  # an enum
    return value


def device_data_oracle(cls, rename: dict[str, tuple[str, float] | str | None] | None = None,
                       name_with_device: bool = False):
    """An oracle from a Bluetooth-Devices `*BluetoothDeviceData` class. `rename` maps an oracle
    key (`binary:<key>` / `event:<key>` for binary sensors and events only) to our name (or
    (name, factor) to convert units, or None to leave it out); with
    `name_with_device` a value of sub-device `probe_2` is named `<key>_probe_2`."""
    rename = rename or {}

    def run(frame: Frame) -> dict | None:
        data = cls()
        update = data.update(ServiceInfo(frame))
        values: dict = {}
        sources = [(k, v.native_value, "") for k, v in update.entity_values.items()]
        sources += [(k, v.native_value, "binary:") for k, v in update.binary_entity_values.items()]
        sources += [(e.device_key, e.event_type, "event:") for e in update.events.values()]
        for key, value, kind in sources:
            name = str(value_of(key.key))
            if name == "signal_strength":
                continue
            target = rename.get(kind + name, rename.get(name, name))
            if target is None:
                continue
            factor = 1.0
            if isinstance(target, tuple):
                target, factor = target
            if name_with_device and key.device_id:
                target = f"{target}_{key.device_id}"
            value = value_of(value)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and factor != 1.0:
                value = value * factor
            values[target] = value
        return values or None

    return run


# ---- Ruuvi (ruuvitag-ble): formats 3, 5, 6 and E1, every byte random (so n/a values too).

def ruuvi_frame(rng: random.Random) -> Frame:
    fmt = rng.choice([3, 5, 6, 0xE1])
    length = {3: 14, 5: 24, 6: 20, 0xE1: 40}[fmt]
    body = bytearray(rng.randrange(256) for _ in range(length - 1))
    if fmt == 3:
        body[0] = rng.randrange(201)  # humidity ≤ 100 %
        body[2] = rng.randrange(100)  # hundredths of a degree
    if rng.random() < 0.7 and fmt in (5, 6, 0xE1):
        # Mostly plausible values, now and then the n/a patterns (all ones).
        pass
    return Frame(address=random_address(rng), name="Ruuvi " + f"{rng.randrange(65536):04X}",
                 manufacturer={0x0499: bytes([fmt]) + bytes(body)})


def ruuvi_oracle():
    from ruuvitag_ble import RuuvitagBluetoothDeviceData
    return device_data_oracle(RuuvitagBluetoothDeviceData, {
        "carbon_dioxide": "co2", "iaqs": "air_quality_score",
        "acceleration_x": ("acceleration_x", 1 / 9.80665), "acceleration_y": ("acceleration_y", 1 / 9.80665),
        "acceleration_z": ("acceleration_z", 1 / 9.80665), "acceleration_total": None,
        "voltage": ("voltage", 1 / 1000), "movement_counter": "movement_counter",
        "measurement_sequence_number": "measurement_sequence", "tx_power": "tx_power",
    })


# ---- BTHome v2 (bthome-ble): 1–4 objects of distinct reading names, random values, a quarter
# of the frames AES-CCM encrypted with a random key (given to both sides).

# (object id, size): fixed-size numeric objects (bthome.io/format); our reading name in NAMES.
BTHOME_NUMBERS = [
    (0x00, 1), (0x01, 1), (0x02, 2), (0x03, 2), (0x04, 3), (0x05, 3), (0x06, 2), (0x07, 2), (0x08, 2),
    (0x09, 1), (0x0A, 3), (0x0B, 3), (0x0C, 2), (0x0D, 2), (0x0E, 2), (0x12, 2), (0x13, 2), (0x14, 2),
    (0x2E, 1), (0x2F, 1), (0x3D, 2), (0x3E, 4), (0x3F, 2), (0x40, 2), (0x41, 2), (0x42, 3), (0x43, 2),
    (0x44, 2), (0x45, 2), (0x46, 1), (0x47, 2), (0x48, 2), (0x49, 2), (0x4A, 2), (0x4B, 3), (0x4C, 4),
    (0x4D, 4), (0x4E, 4), (0x4F, 4), (0x50, 4), (0x51, 2), (0x52, 2), (0x55, 4), (0x56, 2), (0x57, 1),
    (0x58, 1), (0x59, 1), (0x5A, 2), (0x5B, 4), (0x5C, 4), (0x5D, 2), (0x5E, 2), (0x5F, 2), (0x60, 1),
    (0x61, 2), (0x62, 4), (0x63, 4), (0x64, 1),
]
BTHOME_BINARIES = [i for i in range(0x0F, 0x2E) if i not in (0x12, 0x13, 0x14)]
# Objects whose reading name another id shares: at most one of a group per frame.
BTHOME_GROUPS = {
    "temperature": {0x02, 0x45, 0x57, 0x58}, "humidity": {0x03, 0x2E}, "moisture": {0x14, 0x2F, 0x24},
    "count": {0x09, 0x3D, 0x3E, 0x59, 0x5A, 0x5B}, "weight": {0x06, 0x07}, "voltage": {0x0C, 0x4A},
    "energy": {0x0A, 0x4D}, "power": {0x0B, 0x5C, 0x10}, "current": {0x43, 0x5D}, "distance": {0x40, 0x41},
    "speed": {0x44, 0x62}, "acceleration": {0x51, 0x63}, "volume": {0x47, 0x48, 0x4E}, "gas": {0x4B, 0x4C, 0x1B},
    "co2": {0x12, 0x1A}, "voc": {0x13, 0x1B},
}
BTHOME_BUTTON_EVENTS = [0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x80, 0xFE]


def bthome_frame(rng: random.Random) -> Frame:
    chosen: list[int] = []
    used: set[str] = set()
    pool = [i for i, _ in BTHOME_NUMBERS] + BTHOME_BINARIES + [0x3A, 0x3C, 0x53]
    while len(chosen) < rng.randint(1, 4):
        oid = rng.choice(pool)
        group = next((g for g, ids in BTHOME_GROUPS.items() if oid in ids), f"id{oid}")
        if group in used or oid in chosen:
            continue
        used.add(group)
        chosen.append(oid)
    body = bytearray()
    frame_tolerances: dict[str, float] = {}
    sizes = dict(BTHOME_NUMBERS)
    for oid in sorted(chosen):
        if oid == 0x58:
            # bthome-ble rounds to the decimals of the factor's exponent: 0.35 → 0.1 °C.
            frame_tolerances["temperature"] = 0.051
        body.append(oid)
        if oid in sizes:
            body += bytes(rng.randrange(256) for _ in range(sizes[oid]))
        elif oid in BTHOME_BINARIES:
            body.append(rng.randrange(2))
        elif oid == 0x3A:
            body.append(rng.choice(BTHOME_BUTTON_EVENTS))
        elif oid == 0x3C:
            body += bytes([rng.randrange(3), rng.randrange(256)])
        elif oid == 0x53:
            text = "".join(rng.choice("abcdefghij klmnop") for _ in range(rng.randint(1, 8))).encode()
            body += bytes([len(text)]) + text
    address = random_address(rng)
    frame = Frame(address=address, name="BTHome " + address[-5:].replace(":", ""), tolerances=frame_tolerances)
    if rng.random() < 0.25:
        from cryptography.hazmat.primitives.ciphers.aead import AESCCM
        key = bytes(rng.randrange(256) for _ in range(16))
        info = 0x41
        counter = bytes(rng.randrange(256) for _ in range(4))
        nonce = bytes.fromhex(address.replace(":", "")) + bytes([0xD2, 0xFC, info]) + counter
        sealed = AESCCM(key, tag_length=4).encrypt(nonce, bytes(body), None)
        frame.service = {"fcd2": bytes([info]) + sealed[:-4] + counter + sealed[-4:]}
        frame.bindkey = key
    else:
        frame.service = {"fcd2": bytes([0x40]) + bytes(body)}
    return frame


def bthome_oracle():
    from bthome_ble import BTHomeBluetoothDeviceData

    names = {
        "mass": "weight", "carbon_dioxide": "co2", "volatile_organic_compounds": "voc", "packet_id": "packet_id",
        "dimmer": "dimmer", "binary:battery": "battery_low",
    }

    def run(frame: Frame) -> dict | None:
        cls = (lambda: BTHomeBluetoothDeviceData(bindkey=frame.bindkey)) if frame.bindkey else BTHomeBluetoothDeviceData
        return device_data_oracle(cls, names)(frame)

    return run


# ---- MiBeacon v2–v5 (xiaomi-ble): the classic sensor objects for sensors xiaomi-ble knows,
# MAC included; a quarter of the v4/v5 frames AES-CCM encrypted with a random bind key.

# Product id → the objects that model sends. LYWSD03MMC (0x055B) and MHO-C401 (0x0387) send
# humidity too, but xiaomi-ble truncates it to whole percent for them by design (not on air).
MIBEACON_DEVICES = {
    0x01AA: [0x1004, 0x1006, 0x100A, 0x100D], 0x0347: [0x1004, 0x1006, 0x100A, 0x100D],
    0x0576: [0x1004, 0x1006, 0x100A, 0x100D], 0x066F: [0x1004, 0x1006, 0x100A, 0x100D],
    0x045B: [0x1004, 0x1006, 0x100A], 0x055B: [0x1004, 0x100A], 0x0387: [0x1004, 0x100A],
    0x0098: [0x1004, 0x1007, 0x1008, 0x1009, 0x100A], 0x03BC: [0x1004, 0x1007, 0x1008, 0x1009, 0x100A],
    0x015D: [0x1008, 0x1009], 0x02DF: [0x1004, 0x1006, 0x100A, 0x100D, 0x1010],
}
MIBEACON_OBJECTS = {  # id: size
    0x1004: 2, 0x1006: 2, 0x100A: 1, 0x100D: 4, 0x1007: 3, 0x1008: 1, 0x1009: 2, 0x1010: 2,
}


def mibeacon_frame(rng: random.Random) -> Frame:
    address = random_address(rng)
    version = rng.choice([2, 3, 4, 5])
    device = rng.choice(list(MIBEACON_DEVICES))
    oid = rng.choice(MIBEACON_DEVICES[device])
    size = MIBEACON_OBJECTS[oid]
    value = bytearray(rng.randrange(256) for _ in range(size))
    if oid == 0x1006:  # humidity ≤ 100 %
        value[0:2] = rng.randrange(1001).to_bytes(2, "little")
    if oid == 0x100D:
        value[0:2] = rng.randrange(-400, 600).to_bytes(2, "little", signed=True)
        value[2:4] = rng.randrange(1001).to_bytes(2, "little")
    if oid == 0x1004:
        value[0:2] = rng.randrange(-400, 600).to_bytes(2, "little", signed=True)
    if oid in (0x100A, 0x1008):
        value[0] = rng.randrange(101)
    obj = oid.to_bytes(2, "little") + bytes([size]) + bytes(value)
    counter = rng.randrange(256)
    if version >= 4 and rng.random() < 0.25:
        key = bytes(rng.randrange(256) for _ in range(16))
        extended = bytes(rng.randrange(256) for _ in range(3))
        return mibeacon_seal(address, version, device, counter, obj, key, extended)
    return mibeacon_seal(address, version, device, counter, obj)


def mibeacon_seal(
    address: str,
    version: int,
    product: int,
    counter: int,
    obj: bytes,
    key: bytes | None = None,
    extended: bytes | None = None,
) -> Frame:
    """A MiBeacon frame with the MAC and its objects; AES-CCM encrypted (v4/v5 layout: objects,
    3-byte extended counter, 4-byte MIC; AAD 0x11) when `key` and `extended` are given."""
    mac = bytes.fromhex(address.replace(":", ""))
    control = (version << 12) | 0x40 | 0x10 | (0x08 if key and extended else 0)
    header = control.to_bytes(2, "little") + product.to_bytes(2, "little") + bytes([counter]) + mac[::-1]
    frame = Frame(address=address)
    if key and extended:
        from cryptography.hazmat.primitives.ciphers.aead import AESCCM
        nonce = mac[::-1] + header[2:5] + extended
        sealed = AESCCM(key, tag_length=4).encrypt(nonce, obj, b"\x11")
        frame.service = {"fe95": header + sealed[:-4] + extended + sealed[-4:]}
        frame.bindkey = key
    else:
        frame.service = {"fe95": header + obj}
    return frame


def mibeacon_oracle():
    from xiaomi_ble import XiaomiBluetoothDeviceData

    def run(frame: Frame) -> dict | None:
        cls = (lambda: XiaomiBluetoothDeviceData(bindkey=frame.bindkey)) if frame.bindkey else XiaomiBluetoothDeviceData
        # xiaomi-ble adds an estimated voltage for some models (not on air).
        return device_data_oracle(cls, {"voltage": None})(frame)

    return run


# ---- Govee thermometers (govee-ble): H5075, H5074, the H5101 family, H5179, H5106.

def govee_packed(rng: random.Random) -> tuple[bytes, int]:
    tenths = rng.randrange(-400, 1000)
    humidity = rng.randrange(1000)
    value = abs(tenths) * 1000 + humidity
    if tenths < 0:
        value |= 0x800000
    return value.to_bytes(3, "big"), tenths


def govee_frame(rng: random.Random) -> Frame:
    address = random_address(rng)
    suffix = address[-5:].replace(":", "")
    battery = rng.randrange(101)
    model = rng.choice(["H5075", "H5072", "H5074", "H5101", "H5102", "H5104", "H5179", "H5106"])
    if model in ("H5075", "H5072"):
        packed, _ = govee_packed(rng)
        return Frame(address, f"GVH{model[1:]}_{suffix}", manufacturer={0xEC88: b"\x00" + packed + bytes([battery, 0])})
    if model == "H5074":
        temp = rng.randrange(-4000, 6000).to_bytes(2, "little", signed=True)
        hum = rng.randrange(10000).to_bytes(2, "little")
        return Frame(address, f"Govee_H5074_{suffix}",
                     manufacturer={0xEC88: b"\x00" + temp + hum + bytes([battery, 2])})
    if model == "H5179":
        temp = rng.randrange(-4000, 6000).to_bytes(2, "little", signed=True)
        hum = rng.randrange(10000).to_bytes(2, "little")
        return Frame(address, f"Govee_H5179_{suffix}",
                     manufacturer={0x8801: bytes([0xEC, 0, 1, 1]) + temp + hum + bytes([battery])})
    if model == "H5106":
        tenths = rng.randrange(0, 500)
        value = tenths * 1_000_000 + rng.randrange(1000) * 1000 + rng.randrange(1000)
        return Frame(address, f"GVH5106_{suffix}", manufacturer={0x0001: bytes([1, 1]) + value.to_bytes(4, "big")})
    packed, _ = govee_packed(rng)
    return Frame(address, f"GV{model}_{suffix}", manufacturer={0x0001: bytes([1, 1]) + packed + bytes([battery])})


def govee_oracle():
    from govee_ble import GoveeBluetoothDeviceData
    return device_data_oracle(GoveeBluetoothDeviceData, {"pm25": "pm25"})


def build() -> list[Family]:
    return [
        Family("Ruuvi", "ruuvitag-ble", ruuvi_frame, ruuvi_oracle()),
        Family("BTHome v2", "bthome-ble", bthome_frame, bthome_oracle()),
        Family("MiBeacon", "xiaomi-ble", mibeacon_frame, mibeacon_oracle()),
        Family("Govee", "govee-ble", govee_frame, govee_oracle()),
    ]


def discover() -> list[Family]:
    """The families above plus those of every `family_*.py` beside this file (a module-level
    `FAMILIES` list each), in file-name order."""
    import importlib
    from pathlib import Path
    found = build()
    for path in sorted(Path(__file__).resolve().parent.glob("family_*.py")):
        found += importlib.import_module(path.stem).FAMILIES
    return found


FAMILIES = discover()
