"""ATC1441 and pvvx custom thermometer firmware (github.com/atc1441 and github.com/pvvx
ATC_MiThermometer), service data 0x181A — Theengs `LYWSD03MMC_ATC` / `LYWSD03MMC_PVVX`.
ATC1441, 13 bytes: MAC (written order), temperature int16 BE × 0.1 °C, humidity u8 %, battery
u8 %, battery u16 BE mV, frame counter u8. pvvx, 15 bytes: MAC (reversed), temperature int16 LE
× 0.01 °C, humidity u16 LE × 0.01 %, battery u16 LE mV, battery u8 %, counter u8, flags u8.
The MAC is the sender's address (the firmware's own)."""
from __future__ import annotations

import random

from families import Family, Frame, random_address
from theengs_oracle import as_unsigned, theengs_oracle

# The devices the firmware runs on: Xiaomi LYWSD03MMC / MJWSD05MMC and MHO-C401 (OUI A4:C1:38,
# named `ATC_xxxxxx` or the stock name) and Qingping CGG1 / CGDK2 (OUI 58:2D:34, named `CGG_` /
# `CGDK2_` + the MAC's last three bytes). Theengs tells the models apart by name or OUI.
DEVICES = [("A4C138", "ATC_"), ("A4C138", "LYWSD03MMC"), ("A4C138", "MHO-C401"), ("A4C138", "MJWSD05MMC"),
           ("582D34", "CGG_"), ("582D34", "CGDK2_")]
MODELS = {f"{m}_{v}" for m in ("LYWSD03MMC/MJWSD05MMC", "CGG1", "CGDK2") for v in ("ATC", "ATC1441", "PVVX")}


def atc_frame(rng: random.Random) -> Frame:
    oui, name = rng.choice(DEVICES)
    address = ":".join([oui[0:2], oui[2:4], oui[4:6]] + random_address(rng).split(":")[:3])
    mac = bytes.fromhex(address.replace(":", ""))
    if name.endswith("_"):
        name += address[-8:].replace(":", "")
    if rng.random() < 0.5:
        body = mac + rng.randrange(-32768, 32768).to_bytes(2, "big", signed=True)
        body += bytes([rng.randrange(101), rng.randrange(101)]) + rng.randrange(65536).to_bytes(2, "big")
        body += bytes([rng.randrange(256)])
    else:
        body = mac[::-1] + rng.randrange(-32768, 32768).to_bytes(2, "little", signed=True)
        body += rng.randrange(10001).to_bytes(2, "little") + rng.randrange(65536).to_bytes(2, "little")
        body += bytes([rng.randrange(101), rng.randrange(256), rng.randrange(256)])
    return Frame(address=address, name=name, service={"181a": body})


# Theengs reads the battery millivolts (u16 in both firmwares' advertisement structs) as int16,
# so 32.768 V and up come out negative: compared as its value + 65.536 V there (docs/parsers.md,
# Oracle lane).
FAMILIES = [Family("ATC1441/pvvx", "theengsdecoder 2.5.0", atc_frame,
                   theengs_oracle(convert={"volt": as_unsigned(16, 0.001)}, models=MODELS))]
