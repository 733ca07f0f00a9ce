"""ThermoBeacon WS02 / WS08 (Theengs `ThermoBeacon_json.h`): company id 0x0010 / 0x0011 / 0x0015 /
0x0018 / 0x001B (varies with the model), two bytes, the address reversed (6), then 18-byte frame:
voltage u16 LE mV, temperature int16 LE / 16 °C, humidity int16 LE / 16 %, uptime u32 LE s; or
20-byte frame: maximum temperature int16 LE / 16 °C and its uptime u32 LE, the same for the minimum."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import as_unsigned, theengs_oracle

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


# The WS02/WS08 field names (time → uptime, tempc_max → temperature_max, …) are the shared
# per-device ones (Tests/Fixtures/oracle-names.json); Theengs' `mac` is not on air here.
FAMILIES = [
    # Theengs reads the u16 millivolts as int16 (≥ 32.768 V comes out negative): compared as its
    # value + 65.536 V there (docs/parsers.md, Oracle lane).
    Family("ThermoBeacon", "theengsdecoder 2.5.0", thermobeacon_frame,
           theengs_oracle(rename={"mac": None}, convert={"volt": as_unsigned(16, 0.001)}, models={"WS02/WS08"})),
]
