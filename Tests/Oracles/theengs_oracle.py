"""Theengs Decoder (theengsdecoder, pinned in requirements.txt) as the oracle for the families
only Theengs decodes.

`TheengsDecoder.decodeBLE` takes one JSON document per advertisement — `id` (the address),
`name`, `manufacturerdata` (hex: the company id little-endian, then the payload), `servicedata`
(hex) with its 16-bit `servicedatauuid` — and answers a JSON string with Theengs' field names
(or None). The renaming to our reading names is the one the advertisement vector tests use, from
the same file (Tests/Fixtures/oracle-names.json: names, per-device names, fields not on air,
button codes); unit conversions and each family's own names come through the arguments.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from families import Frame

# Oracle field names → ours, per-device names, fields not on air and Theengs' button codes:
# Tests/Fixtures/oracle-names.json, which the advertisement vector tests read too.
_SHARED = json.loads((Path(__file__).resolve().parents[1] / "Fixtures" / "oracle-names.json").read_text())
NAMES: dict[str, str] = _SHARED["names"]
DEVICE_NAMES: dict[str, dict[str, str]] = _SHARED["deviceNames"]
BUTTONS = {int(code): name for code, name in _SHARED["theengsButtons"].items()}

# Theengs' document and device metadata (never in the vectors' `expected`), and what is not on air.
METADATA = {
    "id", "name", "manufacturerdata", "servicedata", "servicedatauuid", "uuid", "rssi", "brand", "model",
    "model_id", "type", "cidc", "acts", "cont", "track", "prmac", "mfid",
} | set(_SHARED["notOnAir"])


def theengs_document(frame: Frame) -> dict:
    doc: dict = {"id": frame.address}
    if frame.name:
        doc["name"] = frame.name
    for company, payload in frame.manufacturer.items():
        doc["manufacturerdata"] = company.to_bytes(2, "little").hex() + bytes(payload).hex()
    for uuid, payload in frame.service.items():
        doc["servicedata"] = bytes(payload).hex()
        doc["servicedatauuid"] = "0x" + uuid.lower()
    if frame.uuids and not frame.service:
        # Theengs reads a listed 16-bit service UUID (Jaalee's F525) from `servicedatauuid` too.
        doc["servicedatauuid"] = "0x" + frame.uuids[0].lower()
    return doc


def decode(frame: Frame) -> dict | None:
    import TheengsDecoder
    out = TheengsDecoder.decodeBLE(json.dumps(theengs_document(frame)))
    return json.loads(out) if out else None


def theengs_oracle(rename: dict[str, str | None] | None = None,
                   device_names: dict[str, dict[str, str | None]] | None = None,
                   ignore: set[str] | frozenset[str] = frozenset(),
                   convert: dict[str, Callable] | None = None,
                   models: set[str] | None = None) -> Callable[[Frame], dict | None]:
    """An oracle from Theengs Decoder. `rename` maps a Theengs key to our name (None: left out)
    before the common NAMES; `device_names` does so per Theengs `model_id` (over the shared
    DEVICE_NAMES); `ignore` leaves keys
    out; `convert[key](value, output)` turns a Theengs value into ours (units). With `models`, a
    frame Theengs decodes as another model yields `theengs_model` (so it counts as a disagreement,
    never silently compared as the wrong device). A frame Theengs recognises without a value
    (an n/a pattern) yields {}, which agrees only with a gattway decode without readings."""
    rename = rename or {}
    device_names = device_names or {}
    convert = convert or {}

    def run(frame: Frame) -> dict | None:
        out = decode(frame)
        if out is None:
            return None
        model = out.get("model_id")
        if model is None:
            return None  # Theengs recognised nothing (it echoes the input only)
        if models is not None and model not in models:
            return {"theengs_model": model}
        values: dict = {}
        per_device = {**DEVICE_NAMES.get(model, {}), **device_names.get(model, {})}
        for key, value in out.items():
            if key in METADATA or key in ignore:
                continue
            if key in convert:
                value = convert[key](value, out)
            if key in per_device:
                target = per_device[key]
            elif key in rename:
                target = rename[key]
            else:
                target = NAMES.get(key, key)
            if target is None:
                continue
            if target.startswith("button") and isinstance(value, int) and not isinstance(value, bool):
                if value == 0:
                    continue
                value = BUTTONS.get(value, f"code {value}")
            values[target] = value
        return values  # {} when Theengs knows the device but the frame carries no value

    return run


def as_unsigned(bits: int, scale: float) -> Callable:
    """A `convert` for a field Theengs reads signed that is unsigned on air: its negative value
    plus 2^bits × scale is the unsigned reading exactly (so the field's position, byte order and
    scale are still compared)."""
    return lambda value, out: value + 2**bits * scale if value < 0 else value


def as_signed(bits: int, scale: float) -> Callable:
    """A `convert` for a field Theengs reads unsigned that is signed on air (two's complement)."""
    return lambda value, out: value - 2**bits * scale if value >= 2**(bits - 1) * scale else value
