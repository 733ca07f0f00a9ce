"""April Brother ABTemp (Theengs `ABTemp_json.h`): an iBeacon (0x004C, `02 15`) with the fixed
proximity UUID B5B182C7-EAB1-4988-AA99-B5C1517008D9; major random, minor high byte battery %
(0–100), low byte temperature in whole °C (the sensor's −40…85 °C as a signed byte, see
docs/parsers.md, Oracle lane), the power byte tx power at 1 m (−100…−30 dBm)."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import as_unsigned, theengs_oracle

UUID = bytes.fromhex("b5b182c7eab14988aa99b5c1517008d9")


def hyphenated(text: str) -> str:
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def abtemp_frame(rng: random.Random) -> Frame:
    body = b"\x02\x15" + UUID + rng.randrange(65536).to_bytes(2, "big")
    body += bytes([rng.randrange(101)]) + rng.randrange(-40, 86).to_bytes(1, "big", signed=True)
    body += rng.randrange(-100, -29).to_bytes(1, "big", signed=True)
    return Frame(address=random_address(rng), name="ABTemp", manufacturer={0x004C: body})


FAMILIES = [Family("April Brother ABTemp", "theengsdecoder 2.5.0", abtemp_frame,
                   theengs_oracle(convert={"uuid": lambda v, out: hyphenated(v), "major": as_unsigned(16, 1)},
                                  models={"ABTemp"}))]
