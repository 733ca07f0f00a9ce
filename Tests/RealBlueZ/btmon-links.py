#!/usr/bin/env python3
"""The LE link events of a btmon text capture, in order, as JSON lines.

    btmon-links.py BTMON-TEXT

One object per packet that sets or shows a link's parameters: "create" (LE Create Connection or LE
Extended Create Connection: the parameters the host asks for), "complete" (LE Connection Complete
or LE Enhanced Connection Complete: what the link got), "update" (the LE Connection Update
command), "updated" (LE Connection Update Complete). Intervals in ms, the timeout in ms:
{"kind": "create", "min": 7.5, "max": 15.0, "latency": 2, "timeout": 4000}; "complete" and
"updated" carry "interval" instead of min and max. Used by guest-params.sh.
"""
import json
import re
import sys


def number(text):
    """'7.50 msec (0x0006)' -> 7.5, '2 (0x0002)' -> 2."""
    match = re.match(r'\s*([0-9.]+)', text or '')
    if not match:
        return None
    value = float(match.group(1))
    return int(value) if value.is_integer() else value


def main():
    text = open(sys.argv[1], errors='replace').read()
    # Each packet: a header line ("< HCI Command: LE Extended Create Connec.. (0x08|0x0043)", btmon
    # 5.66 cuts long names; "> HCI Event: LE Meta Event (0x3e)") and indented fields below it.
    for block in re.split(r'\n(?=[<>@=] )', text):
        fields = {k.strip(): v for k, v in re.findall(r'^\s+([A-Za-z ]+): (.*)$', block, re.M)}
        if re.search(r'HCI Command: LE (Extended )?Create Conn', block):
            kind = 'create'
        elif re.search(r'HCI Command: LE Connection Update', block):
            kind = 'update'
        elif re.search(r'^\s+LE (Enhanced )?Connection Complete', block, re.M):
            kind = 'complete'
        elif re.search(r'^\s+LE Connection Update Complete', block, re.M):
            kind = 'updated'
        else:
            continue
        event = {'kind': kind, 'latency': number(fields.get('Connection latency')),
                 'timeout': number(fields.get('Supervision timeout'))}
        if kind in ('create', 'update'):
            event['min'] = number(fields.get('Min connection interval'))
            event['max'] = number(fields.get('Max connection interval'))
        else:
            event['interval'] = number(fields.get('Connection interval'))
        print(json.dumps(event))


if __name__ == '__main__':
    main()
