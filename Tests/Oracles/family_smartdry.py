"""SmartDry laundry sensor (Theengs `SmartDry_json.h`): manufacturer 0x01AE, 12 bytes LE:
temperature float32 °C, humidity float32 %, shake u16, battery byte (mV − 2847), status (bit 0
awake)."""
from __future__ import annotations

import random
import struct

from families import Family, Frame, random_address
from theengs_oracle import theengs_oracle


def smartdry_frame(rng: random.Random) -> Frame:
    body = struct.pack("<ff", rng.uniform(-20, 100), rng.uniform(0, 100))
    body += rng.randrange(65536).to_bytes(2, "little") + bytes([rng.randrange(256), rng.randrange(256)])
    return Frame(address=random_address(rng), manufacturer={0x01AE: body})


FAMILIES = [Family("SmartDry", "theengsdecoder 2.5.0", smartdry_frame, theengs_oracle(models={"SDLS"}))]
