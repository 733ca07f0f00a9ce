"""Theengs Decoder (theengsdecoder, pinned in requirements.txt) as the oracle for the families
only Theengs decodes.

`TheengsDecoder.decodeBLE` takes one JSON document per advertisement — `id` (the address),
`name`, `manufacturerdata` (hex: the company id little-endian, then the payload), `servicedata`
(hex) with its 16-bit `servicedatauuid` — and answers a JSON string with Theengs' field names
(or None). The renaming to our reading names and units is the one the advertisement vector tests
use (Tests/ParsersTests/AdvertisementVectorTests.swift: `names`, `deviceNames`, `ignored`, the
unit conversions of `evaluate`); each family adds its own through the arguments.
"""
from __future__ import annotations

import json
from typing import Callable

from families import Frame

# Theengs field names → ours (AdvertisementVectorTests.names, the part the Theengs families use).
NAMES = {
    "tempc": "temperature", "hum": "humidity", "batt": "battery", "volt": "voltage", "pres": "pressure",
    "lux": "illuminance", "moi": "moisture", "fer": "conductivity", "for": "formaldehyde",
    "packet": "packet_id", "tx": "tx_power", "txpower": "tx_power", "mov": "movement_counter",
    "seq": "measurement_sequence", "battery_voltage": "voltage", "open": "window", "rot": "rotation",
    "accx": "acceleration_x", "accy": "acceleration_y", "accz": "acceleration_z", "button1": "button_1",
    "button2": "button_2", "button3": "button_3", "button4": "button_4", "lowbatt": "battery_low",
    "batt_low": "battery_low", "lvl_cm": "water_level", "tempc2_dp": "dew_point",
    "x_axis": "acceleration_x", "y_axis": "acceleration_y", "z_axis": "acceleration_z",
    "seconds": "duration", "litres": "water", "modeltype": "model_type", "tempc2": "temperature_2",
    "bpm": "heart_rate", "act_bpm": "heart_rate", "beaconmodel": "beacon_model", "unit": "weight_unit",
    "batt_r": "battery_right", "batt_l": "battery_left", "batt_case": "battery_case",
    "charging_r": "charging_right", "charging_l": "charging_left",
}

# Theengs' document and device metadata, and values it derives (not on air).
METADATA = {
    "id", "name", "manufacturerdata", "servicedata", "servicedatauuid", "uuid", "rssi", "brand", "model",
    "model_id", "type", "cidc", "acts", "cont", "track", "prmac", "mfid",
    # AdvertisementVectorTests.ignored: °F copies, unit strings, decoder flags.
    "tempf", "tempf2", "tempf2_dp", "tempf_max", "tempf_min", "lvl_in", "avgu", "sumu", "bvpp",
}

# Theengs' integer button codes → our event names (AdvertisementVectorTests.theengsButtons).
BUTTONS = {1: "press", 2: "double_press", 3: "triple_press", 4: "quadruple_press", 5: "quintuple_press",
           9: "long_press", 10: "release", 11: "hold"}


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
    before the common NAMES; `device_names` does so per Theengs `model_id`; `ignore` leaves keys
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
        per_device = device_names.get(model, {})
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
