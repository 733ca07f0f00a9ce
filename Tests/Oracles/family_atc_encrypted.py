"""The encrypted 0x181A beacons of pvvx's ATC_MiThermometer firmware (github.com/pvvx
ATC_MiThermometer `src/custom_beacon.c` / `custom_beacon.h`), decoded by bleparser (the parser of
the Home Assistant "ble_monitor" custom component, which decrypts them) as the oracle.

Service data after the UUID: frame counter (1 byte), AES-128-CCM ciphertext, 4-byte MIC.
- atc1441 encrypted, 8 bytes: plaintext temperature u8 (°C = raw / 2 − 40), humidity u8
  (% = raw / 2), battery u8 (bits 0–6 level %, bit 7 the trigger flag);
- pvvx encrypted, 11 bytes: plaintext temperature int16 LE × 0.01 °C, humidity u16 LE × 0.01 %,
  battery u8 %, flags u8.
Nonce: the MAC least significant octet first, then the AD structure's length byte (service data
+ 3), type 0x16, UUID `1A 18` and the counter; associated data 0x11. Each frame has its own random
bind key (given to both sides); sealed here with `cryptography`, opened by bleparser with
pycryptodomex.
"""
from __future__ import annotations

import random

from families import Family, Frame, random_address

# The devices the firmware runs on (OUI and the name it advertises; the name is not part of the
# format and neither side reads it): Xiaomi LYWSD03MMC / MJWSD05MMC / MHO-C401 and Qingping
# CGG1 / CGDK2.
DEVICES = [("A4C138", "ATC_"), ("A4C138", "LYWSD03MMC"), ("A4C138", "MHO-C401"), ("582D34", "CGG_"),
           ("582D34", "CGDK2_")]


def atc_encrypted_frame(rng: random.Random) -> Frame:
    from cryptography.hazmat.primitives.ciphers.aead import AESCCM
    oui, name = rng.choice(DEVICES)
    address = ":".join([oui[0:2], oui[2:4], oui[4:6]] + random_address(rng).split(":")[:3])
    if name.endswith("_"):
        name += address[-8:].replace(":", "")
    if rng.random() < 0.5:
        # atc1441 encrypted: the battery level the firmware sends is 0..100 %, bit 7 the trigger.
        plaintext = bytes([rng.randrange(256), rng.randrange(256), rng.randrange(101) | rng.choice([0, 0x80])])
    else:
        plaintext = (rng.randrange(-32768, 32768).to_bytes(2, "little", signed=True)
                     + rng.randrange(65536).to_bytes(2, "little") + bytes([rng.randrange(101), rng.randrange(256)]))
    key = bytes(rng.randrange(256) for _ in range(16))
    counter = rng.randrange(256)
    head = bytes([1 + len(plaintext) + 4 + 3, 0x16, 0x1A, 0x18, counter])
    nonce = bytes.fromhex(address.replace(":", ""))[::-1] + head
    sealed = AESCCM(key, tag_length=4).encrypt(nonce, plaintext, b"\x11")
    return Frame(address=address, name=name, service={"181a": bytes([counter]) + sealed}, bindkey=key)


def bleparser_oracle(frame: Frame) -> dict | None:
    """bleparser's `parse_advertisement` with the frame's AD structure (length, 0x16, UUID,
    service data) and its key by MAC. Left out: `voltage`, which bleparser estimates from the
    battery level for these frames (2.2 V + 0.9 V × level; not on air), and for pvvx frames
    `switch` / `opening`, two bits of the flags byte gattway publishes whole as `flags` (as for
    the plain pvvx format; the unit tests check the byte)."""
    from bleparser import BleParser
    mac = bytes.fromhex(frame.address.replace(":", ""))
    payload = bytes(frame.service["181a"])
    parser = BleParser(aeskeys={mac: frame.bindkey}, discovery=True, filter_duplicates=False)
    adstruct = bytes([len(payload) + 3, 0x16, 0x1A, 0x18]) + payload
    result, _ = parser.parse_advertisement(mac, -60, service_data_list=[adstruct])
    if not result or not result.get("data"):
        return None
    values = {"temperature": result["temperature"], "humidity": result["humidity"], "battery": result["battery"],
              "packet_id": result["packet"]}
    if len(payload) == 8:
        values["trigger"] = bool(result["switch"])
    return values


FAMILIES = [Family("ATC/pvvx encrypted", "bleparser 3.7.3", atc_encrypted_frame, bleparser_oracle)]
