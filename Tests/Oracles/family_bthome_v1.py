"""BTHome v1 (legacy, bthome.io/v1; bthome-ble): service data 0x181C (plain) or 0x181E
(AES-CCM: ciphertext, 4-byte counter, 4-byte MIC; nonce MAC + `1E 18` + counter, associated
data 0x11). Each object: a byte with the data type (bits 5–7: 0 unsigned, 1 signed) and the
length including the id (bits 0–4), the id, the little-endian value. The objects v1 has (ids
0x00–0x2D: the numbers and binary sensors of v2 up to the window), 1–4 per frame, each sent
with the signedness v2 gives it, random values; a quarter of the frames encrypted."""
from __future__ import annotations

import random

from families import (BTHOME_BINARIES, BTHOME_GROUPS, BTHOME_NUMBERS, Family, Frame, bthome_oracle,
                      random_address)

V1_NUMBERS = [(oid, size) for oid, size in BTHOME_NUMBERS if oid <= 0x2D]
V1_BINARIES = [oid for oid in BTHOME_BINARIES if oid <= 0x2D]
# At most one object per reading name in a frame (as for v2): the binary moisture sensor 0x20
# shares `moisture` with the number 0x14 too.
V1_GROUPS = {**BTHOME_GROUPS, "moisture": BTHOME_GROUPS["moisture"] | {0x20}}


def signed(oid: int) -> bool:
    from bthome_ble.const import MEAS_TYPES
    return MEAS_TYPES[oid].data_format == "signed_integer"


def bthome_v1_frame(rng: random.Random) -> Frame:
    sizes = dict(V1_NUMBERS)
    pool = list(sizes) + V1_BINARIES
    chosen: list[int] = []
    used: set[str] = set()
    count = rng.randint(1, 4)
    while len(chosen) < count:
        oid = rng.choice(pool)
        group = next((g for g, ids in V1_GROUPS.items() if oid in ids), f"id{oid}")
        if group in used or oid in chosen:
            continue
        used.add(group)
        chosen.append(oid)
    body = bytearray()
    for oid in chosen:
        value = bytes(rng.randrange(256) for _ in range(sizes[oid])) if oid in sizes else bytes([rng.randrange(2)])
        kind = 1 if oid in sizes and signed(oid) else 0
        body += bytes([kind << 5 | (1 + len(value)), oid]) + value
    address = random_address(rng)
    frame = Frame(address=address, name="BTHome v1 " + address[-5:].replace(":", ""))
    if rng.random() < 0.25:
        from cryptography.hazmat.primitives.ciphers.aead import AESCCM
        key = bytes(rng.randrange(256) for _ in range(16))
        counter = bytes(rng.randrange(256) for _ in range(4))
        nonce = bytes.fromhex(address.replace(":", "")) + b"\x1e\x18" + counter
        sealed = AESCCM(key, tag_length=4).encrypt(nonce, bytes(body), b"\x11")
        frame.service = {"181e": sealed[:-4] + counter + sealed[-4:]}
        frame.bindkey = key
    else:
        frame.service = {"181c": bytes(body)}
    return frame


def bthome_v1_oracle():
    """bthome-ble, with its minimum encrypted v1 payload of 4 bytes lowered to 3: a v1 object is
    at least 3 bytes (type/length, id, a 1-byte value such as a binary sensor), so a frame with one
    binary object is valid and bthome-ble rejects it for its length alone (docs/parsers.md, Oracle
    lane). Every value is still compared."""
    from bthome_ble.parser import BTHomeData, BTHomeVersion
    base = bthome_oracle()
    original = BTHomeData.get_minimum_payload_length

    def minimum(self) -> int:
        return 3 if self.get_bthome_version() == BTHomeVersion.V1 else original(self)

    def run(frame: Frame) -> dict | None:
        BTHomeData.get_minimum_payload_length = minimum
        try:
            return base(frame)
        finally:
            BTHomeData.get_minimum_payload_length = original

    return run


FAMILIES = [Family("BTHome v1", "bthome-ble 3.25.0", bthome_v1_frame, bthome_v1_oracle())]
