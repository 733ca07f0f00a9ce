#!/usr/bin/env python3
"""A Bluetooth proxy client's BluetoothSetConnectionParamsRequest, in the real-BlueZ VM.

Run by Tests/RealBlueZ/guest-params.sh with the python of .venv-esphome (aioesphomeapi; passed in
as RBZ_ESPHOME_PYTHON) while `gattway run` serves the ESPHome API in plaintext on the guest's
loopback, scanning hci0 on the management path, and hci3 advertises connectable:

    params-client.py --port PORT --address AA:BB:CC:DD:EE:FF

Connects the device through the proxy, asks for 7.5-15 ms, latency 0, 4000 ms with
aioesphomeapi's bluetooth_device_set_connection_params, disconnects and connects again. Prints
"MARK <name> <guest uptime>" before each step (guest-params.sh finds them in btmon's timestamps)
and one "PASS|FAIL params.proxy-<name> detail" line per check: connect, answer (the request is
answered ESP_ERR_NOT_SUPPORTED, 0x106: loaded for the next connect, not applied to the live link),
reconnect. A check without its line is a FAIL.
"""
import argparse
import asyncio
import subprocess
import sys

CHECKS = ["connect", "answer", "reconnect"]
CONNECT_WAIT = 60  # s: gattway's Device1.Connect has 20 s, then the services resolve


def uptime():
    with open("/proc/uptime") as f:
        return f.read().split()[0]


def say(*words):
    print(f"[params-client {uptime()}]", *words, flush=True)


def check(name, ok, detail=""):
    assert name in CHECKS, name
    print(("PASS" if ok else "FAIL") + f" params.proxy-{name} {detail}", flush=True)


def advertise_anew():
    """btvirt's controllers report an advertisement only when advertising or scanning starts."""
    for command in (["rm-adv", "1"], ["add-adv", "-c", "-g", "1"]):
        subprocess.run(["btmgmt", "--index", "3", *command], capture_output=True, check=False)


async def connect(client, address):
    states = []
    done = asyncio.Event()

    def on_state(connected, mtu, error):
        states.append((connected, mtu, error))
        done.set()

    async def nudge():
        while not done.is_set():
            await asyncio.sleep(5)
            advertise_anew()

    nudging = asyncio.create_task(nudge())
    try:
        await client.bluetooth_device_connect(
            address, on_state, timeout=CONNECT_WAIT, feature_flags=0x7F, address_type=0)
    except Exception as error:  # noqa: BLE001  (the check says so)
        states.append((False, 0, repr(error)))
    finally:
        nudging.cancel()
    return states[0] if states else (False, 0, None)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--address", required=True)
    args = parser.parse_args()
    from aioesphomeapi import APIClient
    from aioesphomeapi.core import BluetoothConnectionParamsAPIError

    address = int(args.address.replace(":", ""), 16)
    client = APIClient("127.0.0.1", args.port, None, client_info="rbz-params")
    await client.connect(login=True)
    print(f"MARK connect {uptime()}", flush=True)
    connected, mtu, error = await connect(client, address)
    check("connect", connected, f"connected {connected}, MTU {mtu}, error {error}")
    if not connected:
        return
    await asyncio.sleep(1)  # the peer's own parameter update, if any, comes first
    print(f"MARK set {uptime()}", flush=True)
    code = 0
    try:
        await client.bluetooth_device_set_connection_params(address, 6, 12, 0, 400, api_timeout=10)
    except BluetoothConnectionParamsAPIError as error:
        code = error.error_code
    except Exception as error:  # noqa: BLE001  (the check says so)
        code = repr(error)
    check("answer", code == 0x106, f"error {code!r} (0x106: not applied to the live link, kept for the next connect)")
    await asyncio.sleep(1)
    print(f"MARK disconnect {uptime()}", flush=True)
    await client.bluetooth_device_disconnect(address, timeout=30)
    await asyncio.sleep(1)
    advertise_anew()
    print(f"MARK reconnect {uptime()}", flush=True)
    connected, mtu, error = await connect(client, address)
    check("reconnect", connected, f"connected {connected}, MTU {mtu}, error {error}")
    if connected:
        await client.bluetooth_device_disconnect(address, timeout=30)
    await client.disconnect()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
