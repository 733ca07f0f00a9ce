"""Blue Maestro Tempo Disc (bluemaestro-ble): manufacturer 0x0133, big-endian: 1 in 1 (0x0D,
10 bytes), 3 in 1 (0x16 / 0x17, 14 bytes), 4 in 1 (0x1B, 14 bytes), Temperature Sensor v8 (0x08,
as the 1 in 1); little-endian Tempo Disc Maxi T / TH / THP (0x29 / 0x2A / 0x2B, at least 17 / 19 /
23 bytes, then statistics)."""
from __future__ import annotations

import random

from families import Family, Frame, device_data_oracle, random_address

NAMES = {0x0D: "TempoDisc 1in1", 0x16: "TempoDisc 3in1", 0x17: "TempoDisc 3in1", 0x1B: "TempoDisc 4in1",
         0x08: "BlueMaestro", 0x29: "Tempo Disc Maxi", 0x2A: "Tempo Disc Maxi", 0x2B: "Tempo Disc Maxi"}
MAXI = (0x29, 0x2A, 0x2B)


def maxi_frame(rng: random.Random, version: int) -> bytes:
    body = bytes([version, rng.randrange(101)]) + bytes(rng.randrange(256) for _ in range(13))
    body += rng.randrange(-4000, 8501).to_bytes(2, "little", signed=True)
    if version != 0x29:
        body += rng.randrange(10001).to_bytes(2, "little", signed=True)
    if version == 0x2B:
        body += rng.randrange(30000, 110001).to_bytes(4, "little", signed=True)
    return body + bytes(rng.randrange(256) for _ in range(rng.randrange(7)))


def tempo_frame(rng: random.Random) -> Frame:
    version = rng.choice(list(NAMES))
    if version in MAXI:
        return Frame(address=random_address(rng), name=NAMES[version], manufacturer={0x0133: maxi_frame(rng, version)})
    body = bytes([version, rng.randrange(101)]) + rng.randrange(1, 3601).to_bytes(2, "big")
    body += rng.randrange(65536).to_bytes(2, "big") + rng.randrange(-32768, 32768).to_bytes(2, "big", signed=True)
    if version in (0x0D, 0x08):
        body += bytes([0x01, 0x00])
    else:
        body += rng.randrange(1001).to_bytes(2, "big")
        if version == 0x1B:
            body += rng.randrange(65536).to_bytes(2, "big")
        else:
            body += rng.randrange(-32768, 32768).to_bytes(2, "big", signed=True)
        body += bytes([0x01, 0x00])
    return Frame(address=random_address(rng), name=NAMES[version], manufacturer={0x0133: body})


def tempo_oracle():
    from bluemaestro_ble import BlueMaestroBluetoothDeviceData
    base = device_data_oracle(BlueMaestroBluetoothDeviceData)

    def run(frame: Frame) -> dict | None:
        values = base(frame)
        if values is not None and frame.manufacturer[0x0133][0] in MAXI:
            values.pop("dew_point", None)  # computed by bluemaestro-ble for the Maxi, not on air
        return values

    return run


FAMILIES = [Family("Blue Maestro", "bluemaestro-ble", tempo_frame, tempo_oracle())]
