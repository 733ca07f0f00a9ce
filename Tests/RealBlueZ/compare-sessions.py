#!/usr/bin/python3
"""Compares two dbus-session.py recordings step by step: real bluetoothd (in the VM) against the
simulator. Every event line only in one of them is a difference; a difference is accepted only
when an entry of the allow-list (known-differences.json: {"step", "side", "pattern", "reason"},
pattern a regular expression searched in the event's JSON, side "bluez", "simulator" or "both")
covers it. Prints one "PASS|FAIL diff.STEP detail" line per step and, for each difference, the
event and the reason it is allowed; exits 1 on any unexpected difference.

One normalisation before comparing (both recordings alike): the peripheral's
`{ServicesResolved: true, ...}` change is moved to just after the last GATT object of the
peripheral added in the same step. bluetoothd 5.66 queues the InterfacesAdded of the GATT objects
and the Device1 change separately and flushes them in an order that depends on what else was
pending (bluez issue #1489): the change comes after all objects, between them, or before all of
them, from run to run. The event itself, its property set and its step are still compared; only
its position relative to the GATT objects of that step is not.

usage: compare-sessions.py BLUEZ.jsonl SIMULATOR.jsonl known-differences.json
"""
import difflib
import json
import re
import sys


def resolved_change(event):
    return (event.get('event') == 'PropertiesChanged' and event.get('path') == 'DEV'
            and event.get('interface') == 'org.bluez.Device1' and event['changed'].get('ServicesResolved') is True)


def gatt_object_added(event):
    return event.get('event') == 'InterfacesAdded' and event.get('path', '').startswith('DEV/')


def normalise(events):
    """Puts a ServicesResolved=true change after the step's last added GATT object (see above)."""
    resolved = [e for e in events if resolved_change(e)]
    if len(resolved) != 1 or not any(gatt_object_added(e) for e in events):
        return events
    rest = [e for e in events if e is not resolved[0]]
    last = max(i for i, e in enumerate(rest) if gatt_object_added(e))
    return rest[:last + 1] + resolved + rest[last + 1:]


def load(path):
    steps = {}
    order = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            event = json.loads(line)
            step = event.pop('step')
            if step not in steps:
                steps[step] = []
                order.append(step)
            steps[step].append(event)
    return {step: [json.dumps(e, sort_keys=True) for e in normalise(events)] for step, events in steps.items()}, order


def main():
    bluez, order = load(sys.argv[1])
    simulator, sim_order = load(sys.argv[2])
    allowed = json.load(open(sys.argv[3]))
    for step in sim_order:
        if step not in order:
            order.append(step)
    unexpected = 0
    used = set()
    for step in order:
        a, b = bluez.get(step, []), simulator.get(step, [])
        problems, known = [], []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
            if tag == 'equal':
                continue
            for side, lines in (('bluez', a[i1:i2]), ('simulator', b[j1:j2])):
                for line in lines:
                    reason = None
                    for index, entry in enumerate(allowed):
                        if entry['step'] not in (step, '*') or entry['side'] not in (side, 'both'):
                            continue
                        if re.search(entry['pattern'], line):
                            reason = entry['reason']
                            used.add(index)
                            break
                    (known if reason else problems).append((side, line, reason))
        status = 'FAIL' if problems else 'PASS'
        unexpected += len(problems)
        detail = '%d events' % len(a)
        if known:
            detail += ', %d known differences' % len(known)
        if problems:
            detail += ', %d unexpected differences' % len(problems)
        print('%s diff.%s %s' % (status, step, detail))
        for side, line, _reason in problems:
            print('    only in %-9s %s' % (side, line))
        for side, line, reason in known:
            print('    known (%s only): %s -- %s' % (side, line[:160], reason))
    for index, entry in enumerate(allowed):
        if index not in used:
            print('    note: allow-list entry not needed this run: %s %s' % (entry['step'], entry['pattern']))
    sys.exit(1 if unexpected else 0)


if __name__ == '__main__':
    main()
