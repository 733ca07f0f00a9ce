"""Govee probes and events (govee-ble): H5140 CO₂, H5112 two probes, H5178/B5178 with its
remote sensor, H5127 presence, the encrypted H5121–H5126/H5130 event sensors, the meat
thermometers H5181/82/83/84/85/91/98 and the six-probe H5055. (The thermometers are in
families.py, family "Govee".)"""
from __future__ import annotations

import random

from families import Family, Frame, device_data_oracle, random_address


def packed(rng: random.Random) -> bytes:
    """3-byte BE packed temperature/humidity; now and then out of range (the error state)."""
    if rng.random() < 0.1:
        return rng.randrange(0x1000000).to_bytes(3, "big")
    tenths = rng.randrange(-400, 1001)
    value = abs(tenths) * 1000 + rng.randrange(1000)
    return (value | (0x800000 if tenths < 0 else 0)).to_bytes(3, "big")


def battery(rng: random.Random) -> int:
    return rng.randrange(101) | (0x80 if rng.random() < 0.1 else 0)


def crc16(data: bytes) -> int:
    crc = 0x1D0F
    for byte in data:
        for shift in range(7, -1, -1):
            crc = ((crc << 1) ^ (0x1021 if (crc >> 15) ^ ((byte >> shift) & 1) else 0)) & 0xFFFF
    return crc


# The encrypted event sensors: model → (model byte, event values the device sends).
EVENT_MODELS = {
    "H5121": (0x03, [0, 1]), "H5122": (0x08, [0]), "H5123": (0x02, [1, 2]), "H5124": (0x09, [0, 1]),
    "H5125": (0x0A, [0, 1, 2, 3, 4, 5]), "H5126": (0x0B, [0, 1]), "H5130": (0x0D, [0x00, 0x01, 0x10, 0x11]),
}

# Meat thermometers: model → (company ids, payload length).
MEAT_MODELS = {
    "H5181": ([0xF861, 0x388A, 0xEA42, 0xAAA2, 0xD14B], 14), "H5182": ([0x2730], 17),
    "H5183": ([0x67DD, 0xE02F, 0xF79F], 14), "H5184": ([0x1B36], 17), "H5185": ([0x4A32, 0x0332, 0x4C32], 20),
    "H5191": ([0xAC63], 20), "H5198": ([0x3022], 20),
}
KNOWN_IDS = ({0x0001, 0x004C, 0xEC88, 0x8801, 0x8803, 0x8843, 0xEF88}
             | {i for ids, _ in MEAT_MODELS.values() for i in ids})


def probe_value(rng: random.Random) -> bytes:
    """A probe or alarm temperature, int16 BE 0.01 °C; 0xFFFF when no probe / no alarm."""
    return b"\xff\xff" if rng.random() < 0.15 else rng.randrange(0, 30001).to_bytes(2, "big")


def encrypt_event(rng: random.Random, plain: bytes) -> bytes:
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    time_bytes = bytes(rng.randrange(256) for _ in range(4))
    key = time_bytes + bytes(12)
    encryptor = Cipher(algorithms.AES(key[::-1]), modes.ECB()).encryptor()
    sealed = (encryptor.update(plain[::-1]) + encryptor.finalize())[::-1]
    return bytes([rng.randrange(256), rng.randrange(256)]) + time_bytes + sealed + crc16(sealed).to_bytes(2, "big")


def govee_frame(rng: random.Random) -> Frame:
    address = random_address(rng)
    suffix = address[-5:].replace(":", "")
    kind = rng.choice(["H5140", "H5112", "H5178", "H5127", "event", "event", "meat", "meat", "H5055"])
    if kind == "H5140":
        body = b"\x01\x01" + packed(rng) + rng.randrange(400, 5001).to_bytes(2, "big")
        body += bytes([0 if rng.random() < 0.9 else rng.randrange(1, 256)])
        return Frame(address, f"GVH5140_{suffix}", manufacturer={0x0001: body})
    if kind == "H5112":
        body = b"\x01\x01" + packed(rng) + bytes([battery(rng), rng.randrange(256), rng.choice([0x41, 0x82])])
        return Frame(address, f"GV5112_{suffix}", manufacturer={0x0001: body})
    if kind == "H5178":
        body = b"\x01\x01" + bytes([rng.choice([0, 1])]) + packed(rng) + bytes([battery(rng), 0, rng.randrange(256)])
        return Frame(address, f"{rng.choice(['H', 'B'])}5178_{suffix}", manufacturer={0x0001: body})
    if kind == "H5127":
        body = bytes([0xEC, 0x00, rng.choice([1, 2]), 0x01, rng.choice([0, 1]), rng.choice([0x01, 0x11])])
        return Frame(address, f"GVH5127_{suffix}", manufacturer={rng.choice([0x8803, 0x8843]): body})
    if kind == "event":
        model = rng.choice(list(EVENT_MODELS))
        model_byte, values = EVENT_MODELS[model]
        plain = bytes([0x01, rng.randrange(1, 16), model_byte, 0x02, rng.randrange(101), rng.choice(values)])
        plain += bytes(10)
        return Frame(address, f"GV{model[1:]}{suffix}", manufacturer={0xEF88: encrypt_event(rng, plain)})
    if kind == "meat":
        model = rng.choice(list(MEAT_MODELS))
        ids, length = MEAT_MODELS[model]
        group = 1
        if model in ("H5184", "H5198"):
            group = rng.choice([1, 65, 129, 193, 2, 66, 130, 194])
        body = bytes([rng.randrange(256), 0x01, 0x00, 0x01, 0x01, rng.randrange(256), group, rng.randrange(256)])
        if model in ("H5181", "H5183"):
            body += probe_value(rng) + probe_value(rng)
        elif model in ("H5182", "H5184"):
            body += (probe_value(rng) + probe_value(rng) + bytes([rng.randrange(256)])
                     + probe_value(rng) + probe_value(rng))
        elif model == "H5185":
            body += probe_value(rng) + probe_value(rng) + b"\xff\xff" + probe_value(rng) + probe_value(rng)
        elif model == "H5191":
            body += probe_value(rng) + probe_value(rng) + b"\xff\xff"
            body += rng.randrange(-2000, 6001).to_bytes(2, "big", signed=True)
        else:  # H5198: probe, high alarm, low alarm, twice
            body += b"".join(probe_value(rng) for _ in range(6))
        body += bytes(length - len(body))
        return Frame(address, f"GVH{model[1:]}_{suffix}", manufacturer={rng.choice(ids): body})
    # H5055: any "company id" (the device's first two bytes vary), service UUID 0x5550.
    company = rng.randrange(0x10000)
    while company in KNOWN_IDS:
        company = rng.randrange(0x10000)
    group = rng.choice([0x00, 0x40, 0x80])
    first_bit = {0x00: 0x01, 0x40: 0x04, 0x80: 0x10}[group]
    mask, probes = 0, b""
    for bit in (first_bit, first_bit << 1):
        if rng.random() < 0.75:
            mask |= bit
            probes += rng.randrange(0, 301).to_bytes(2, "little", signed=True)
        else:
            probes += b"\xff\xff"
        for _ in range(2):  # low, high alarm
            probes += b"\xff\xff" if rng.random() < 0.3 else rng.randrange(0, 301).to_bytes(2, "little")
        if bit == first_bit:
            probes += bytes([rng.randrange(256)])
    mask |= rng.randrange(64) & ~(first_bit | first_bit << 1)  # the other pairs' probes
    body = bytes([rng.randrange(256), rng.randrange(256), rng.randrange(101), group | mask, rng.randrange(256)])
    body += probes + b"\x00\x00"
    return Frame(address, f"GVH5055_{suffix}" if rng.random() < 0.5 else None,
                 manufacturer={company: body}, uuids=["5550"])


def govee_oracle():
    from govee_ble import GoveeBluetoothDeviceData
    base = device_data_oracle(GoveeBluetoothDeviceData, {"pm25": "pm25", "carbon_dioxide": "co2"},
                              name_with_device=True)

    def run(frame: Frame) -> dict | None:
        values = base(frame)
        if values is None:
            return None
        out = {}
        for key, value in values.items():
            if key.endswith("_primary"):  # H5178 base unit: our names carry no suffix
                key = key[: -len("_primary")]
            out[key] = None if value == "error" else value  # govee-ble's error state: our null
        return out

    return run


FAMILIES = [Family("Govee probes and events", "govee-ble", govee_frame, govee_oracle())]
