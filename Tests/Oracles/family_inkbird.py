"""Inkbird families of the oracle lane (oracle: inkbird-ble).

- IBS-TH1 (`sps`), IBS-TH2 / IBS-P01B (`tps`): the temperature is the company-id field of the
  manufacturer data (int16 × 0.01 °C), then humidity uint16 LE × 0.01 % (`0000`/`FFFF` when the
  model has no humidity sensor, the IBS-P01B), external-probe flag, 2 bytes, battery %, a byte.
- iBBQ grill thermometers (IBT-2X, IBT-4XS, IBT-6XS): company id 0x0000 (or 0x0001, MAC
  reversed), `00 00`, the MAC, one int16 LE × 0.1 °C per probe; `F6 FF` for an unplugged probe.
"""
from __future__ import annotations

import random

from families import Family, Frame, ServiceInfo, device_data_oracle, random_address

# inkbird-ble reads `raw` (the raw advertisement bytes of Home Assistant's ServiceInfo, None when
# not known), which the shared duck-typed ServiceInfo does not carry.
if not hasattr(ServiceInfo, "raw"):
    ServiceInfo.raw = None  # type: ignore[attr-defined]


def ibs_th_frame(rng: random.Random) -> Frame:
    name = rng.choice(["sps", "tps"])
    temperature = rng.randrange(-32768, 32768)  # the whole int16 range, × 0.01 °C
    if name == "tps" and rng.random() < 0.3:
        humidity = rng.choice([0x0000, 0xFFFF])  # IBS-P01B: no humidity sensor
    else:
        humidity = rng.randrange(10001)
    probe = rng.choice([0, 1])
    battery = rng.randrange(101)
    payload = (humidity.to_bytes(2, "little") + bytes([probe, rng.randrange(256), rng.randrange(256), battery,
                                                       rng.randrange(256)]))
    return Frame(address=random_address(rng), name=name,
                 manufacturer={temperature & 0xFFFF: payload}, uuids=["fff0"])


# An unplugged probe reads F6 FF (−1.0 °C if taken as a temperature); some firmware FF FF.
IBBQ_UNPLUGGED = (0xFFF6, 0xFFFF)


def ibbq_frame(rng: random.Random) -> Frame:
    address = random_address(rng)
    mac = bytes.fromhex(address.replace(":", ""))
    probes = rng.choice([2, 4, 6])
    company = rng.choice([0x0000, 0x0001])
    raws = []
    for _ in range(probes):
        if rng.random() < 0.25:
            raws.append(rng.choice(IBBQ_UNPLUGGED))
        else:
            # −30.0 … 300.0 °C, the probes' range (negative: a probe in a freezer).
            raws.append(rng.randrange(-300, 3001) & 0xFFFF)
    payload = b"\x00\x00" + (mac if company == 0 else mac[::-1]) + b"".join(r.to_bytes(2, "little") for r in raws)
    frame = Frame(address=address, name=rng.choice(["iBBQ", "xBBQ"]), manufacturer={company: payload})
    frame.unplugged = [i + 1 for i, r in enumerate(raws) if r in IBBQ_UNPLUGGED]  # type: ignore[attr-defined]
    return frame


def ibbq_oracle():
    from inkbird_ble import INKBIRDBluetoothDeviceData
    rename = {"temperature_probe_1": "temperature"}
    rename.update({f"temperature_probe_{n}": f"temperature_{n}" for n in range(2, 7)})
    run = device_data_oracle(INKBIRDBluetoothDeviceData, rename)

    def oracle(frame: Frame) -> dict | None:
        accepted = bool(INKBIRDBluetoothDeviceData().update(ServiceInfo(frame)).devices)
        if not accepted:
            return None
        values = run(frame) or {}
        # An unplugged probe: inkbird-ble leaves out FF FF (no value, compared as null) but reports
        # F6 FF, the marker the IBT probes send, as −1.0 °C (docs/parsers.md, Oracle lane): that
        # reading is left out of the comparison.
        for n in getattr(frame, "unplugged", []):
            key = "temperature" if n == 1 else f"temperature_{n}"
            if key not in values:
                values[key] = None
            elif values[key] == -1.0:
                del values[key]
        # With every probe at F6 FF nothing is left to compare: counted as a disagreement.
        return values

    return oracle


def ibs_th_oracle():
    from inkbird_ble import INKBIRDBluetoothDeviceData
    return device_data_oracle(INKBIRDBluetoothDeviceData)


FAMILIES = [
    Family("Inkbird IBS-TH", "inkbird-ble", ibs_th_frame, ibs_th_oracle()),
    Family("Inkbird iBBQ", "inkbird-ble", ibbq_frame, ibbq_oracle()),
]
