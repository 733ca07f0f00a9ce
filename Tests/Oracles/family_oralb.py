"""Oral-B toothbrushes (oralb-ble): manufacturer 0x00DC, 9- and 11-byte frames of the Smart,
Genius and iO series, every documented state, mode, pressure byte and sector."""
from __future__ import annotations

import random

from families import Family, Frame, device_data_oracle, random_address

# Model byte (byte 1): the ids oralb-ble knows (Smart/Genius/Pro lines and the iO "SONOS" line).
SMART_MODELS = [0, 1, 2, 32, 33, 34, 39, 40, 41, 64, 65, 66, 67, 68, 69, 70, 80, 81, 82, 83, 84, 85, 86, 87,
                112, 113, 114, 117, 118, 119]
IO_MODELS = [48, 49, 50, 52, 53, 54]
STATES = [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 113, 114, 115, 116]
SMART_MODES = [0, 1, 2, 3, 4, 5, 6, 7, 255]
IO_MODES = [0, 1, 2, 3, 4, 5, 6, 8, 9, 11]
PRESSURES = [0, 16, 32, 48, 50, 54, 56, 58, 80, 82, 86, 90, 112, 114, 118, 120, 122, 144, 146, 150, 154, 178,
             182, 186, 192, 240, 242]
OUR_STATES = {"initializing": "initialising"}


def oralb_frame(rng: random.Random) -> Frame:
    io = rng.random() < 0.35
    model = rng.choice(IO_MODELS if io else SMART_MODELS)
    state = rng.choice(STATES)
    mode = rng.choice(IO_MODES if io else SMART_MODES)
    body = bytes([rng.choice([2, 3, 4, 6]), model, rng.randrange(256), state, rng.choice(PRESSURES),
                  rng.randrange(6), rng.randrange(60), mode, rng.randrange(9)])
    if rng.random() < 0.6:
        body += bytes([rng.randrange(256), rng.choice([4, 6, 8])])
    return Frame(address=random_address(rng), name="Oral-B Toothbrush", manufacturer={0x00DC: body})


def oralb_oracle():
    from oralb_ble import OralBBluetoothDeviceData
    base = device_data_oracle(OralBBluetoothDeviceData, {
        "time": "duration", "toothbrush_state": "state", "binary:brushing": "brushing",
        # Not compared: oralb-ble decodes the pressure byte to a word, we publish the raw byte.
        "pressure": None,
    })

    def run(frame: Frame) -> dict | None:
        values = base(frame)
        if values is None:
            return None
        state = values.get("state")
        if isinstance(state, str):
            if state.startswith("unknown"):
                del values["state"]  # no name for the state: neither side names it
            else:
                values["state"] = OUR_STATES.get(state, state)
        mode = values.get("mode")
        if isinstance(mode, str) and mode.startswith("unknown"):
            del values["mode"]
        sector = values.pop("sector", None)
        body = frame.manufacturer[0x00DC]
        # "no sector" (quadrant 0, or not brushing: oralb-ble then hides the byte) is no value.
        # oralb-ble reads sector byte 7 as "the last sector" and masks bit 3 (byte 8 is "no
        # sector"); Theengs and we publish the byte 1–8 as is: counted as disagreements.
        if isinstance(sector, str) and sector.startswith("sector "):
            values["sector"] = int(sector.split()[1])
        elif sector == "no sector" and body[3] == 3 and body[8] == 8:  # brushing, sector byte 8
            values["sector"] = None
        return values

    return run


FAMILIES = [Family("Oral-B", "oralb-ble", oralb_frame, oralb_oracle())]
