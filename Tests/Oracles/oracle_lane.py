#!/usr/bin/env python3
"""The oracle lane: seeded random advertisements per family, decoded by a maintained open-source
parser from PyPI (the oracle) and by `gattway decode`, compared by value.

    oracle_lane.py GATTWAY [--frames N] [--seed S] [--family NAME] [--report FILE]

Each family (families.py) generates valid frames with random field values — every object type
its format has — and names the oracle that decodes it. A frame agrees when every value the
oracle reports (after the family's name mapping; signal strength and values not on air are left
out) is in gattway's readings with the same value, and gattway reports nothing the oracle
rejects. Prints a table; exits 1 when a family agrees on fewer than 99 % of its frames or has
fewer than N frames. Disagreements are listed (with --report, all of them, in a file).
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import families  # noqa: E402
from families import ServiceInfo  # noqa: E402,F401


def gattway_input(frame: families.Frame) -> str:
    line = {
        "address": frame.address,
        "manufacturer_data": {str(k): bytes(v).hex() for k, v in frame.manufacturer.items()},
        "service_data": {families.uuid128(k): bytes(v).hex() for k, v in frame.service.items()},
    }
    if frame.name:
        line["name"] = frame.name
    if frame.uuids:
        line["service_uuids"] = [families.uuid128(u) for u in frame.uuids]
    if frame.bindkey:
        line["bindkey"] = frame.bindkey.hex()
    return json.dumps(line)


def decode_with_gattway(binary: str, frames: list[families.Frame]) -> list[dict]:
    text = "\n".join(gattway_input(f) for f in frames) + "\n"
    out = subprocess.run([binary, "decode"], input=text, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    if len(lines) != len(frames):
        raise SystemExit(f"gattway decode answered {len(lines)} lines for {len(frames)} frames")
    return [json.loads(line) for line in lines]


def same(ours, theirs, tolerance: float = 0.011) -> bool:
    if theirs is None:
        return ours is None
    if isinstance(theirs, bool) or isinstance(ours, bool):
        return bool(ours) == bool(theirs) and ours is not None
    if isinstance(theirs, (int, float)):
        if not isinstance(ours, (int, float)):
            return False
        return abs(ours - theirs) <= tolerance + abs(theirs) * 1e-4
    return ours == theirs


def compare(frame: families.Frame, ours: dict, theirs: dict | None) -> str | None:
    """None when they agree, else why not."""
    if theirs is None:
        return None if "error" in ours else f"the oracle rejects the frame; ours: {ours}"
    if "error" in ours:
        return f"ours: {ours['error']}; oracle: {theirs}"
    readings = ours.get("readings", {})
    if theirs == {} and not readings:
        return None  # both recognise the frame and neither has a value (an n/a pattern)
    compared = 0
    for name, value in sorted(theirs.items()):
        if name not in readings:
            return f"missing {name} (oracle {value!r}); ours: {readings}"
        if not same(readings[name], value, frame.tolerances.get(name, 0.011)):
            return f"{name}: ours {readings[name]!r}, oracle {value!r}"
        compared += 1
    return None if compared else f"nothing to compare; oracle {theirs}, ours {readings}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("gattway")
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--family", action="append")
    parser.add_argument("--report")
    args = parser.parse_args()
    selected = [f for f in families.FAMILIES if not args.family or f.name in args.family]
    failed = False
    report: list[str] = []
    print(f"{'family':<22} {'oracle':<26} {'frames':>6} {'agree':>6} {'share':>7}")
    for family in selected:
        rng = random.Random(f"{args.seed}/{family.name}")
        frames = [family.generate(rng) for _ in range(args.frames)]
        ours = decode_with_gattway(args.gattway, frames)
        agree = 0
        for frame, mine in zip(frames, ours):
            theirs = family.oracle(frame)
            why = compare(frame, mine, theirs)
            if why is None:
                agree += 1
            else:
                report.append(f"{family.name}: {gattway_input(frame)}\n    {why}")
        share = agree / len(frames) if frames else 0
        ok = share >= 0.99 and len(frames) >= args.frames
        failed |= not ok
        print(f"{family.name:<22} {family.oracle_name:<26} {len(frames):>6} {agree:>6} {share:>7.1%}"
              + ("" if ok else "  FAIL"))
    for line in report[:20]:
        print(line)
    if len(report) > 20:
        print(f"… {len(report) - 20} more disagreements")
    if args.report:
        Path(args.report).write_text("\n".join(report) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
