"""Blue Maestro Tempo Disc (bluemaestro-ble): manufacturer 0x0133, big-endian: 1 in 1 (0x0D,
10 bytes), 3 in 1 (0x16 / 0x17, 14 bytes), 4 in 1 (0x1B, 14 bytes)."""
from __future__ import annotations

import random

from families import Family, Frame, device_data_oracle, random_address

NAMES = {0x0D: "TempoDisc 1in1", 0x16: "TempoDisc 3in1", 0x17: "TempoDisc 3in1", 0x1B: "TempoDisc 4in1"}


def tempo_frame(rng: random.Random) -> Frame:
    version = rng.choice(list(NAMES))
    body = bytes([version, rng.randrange(101)]) + rng.randrange(1, 3601).to_bytes(2, "big")
    body += rng.randrange(65536).to_bytes(2, "big") + rng.randrange(-32768, 32768).to_bytes(2, "big", signed=True)
    if version == 0x0D:
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
    return device_data_oracle(BlueMaestroBluetoothDeviceData)


FAMILIES = [Family("Blue Maestro", "bluemaestro-ble", tempo_frame, tempo_oracle())]
