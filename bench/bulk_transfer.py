#!/usr/bin/env python3
"""The client side of `gattway-bench run bulk` (bench/Sources/BulkBench.swift).

Usage: bulk_transfer.py direct|proxy ADDRESS GO_DIR KINDS [PORT KEY]

direct: bleak on BlueZ (the simulator's org.bluez on DBUS_SYSTEM_BUS_ADDRESS), as the conformance
lane drives it. proxy: bleak-esphome through `gattway run`'s Bluetooth proxy on 127.0.0.1:PORT
with the Noise KEY, over habluetooth's manager as Home Assistant connects through a proxy.
KINDS: a comma list of "command:BYTES" (writes without response), "request:BYTES" (writes with
response) and "slow:SECONDS" (writes with response for that long). Each transfer writes the
bench's pattern in chunks of 244 bytes (ATT MTU 247) to characteristic ff10, printing one JSON
line when it starts and one when the last write call returned (CLOCK_MONOTONIC ns, the clock of
the bench and the simulator), then waits until the bench creates GO_DIR/KIND (it has checked
what the device received) before the next one.
"""
import asyncio
import json
import os
import sys
import time

CHARACTERISTIC = "0000ff10-0000-1000-8000-00805f9b34fb"
CHUNK = 244


def pattern(size):
    """The bytes the bench expects, in order (BulkBench.pattern)."""
    return bytes((i * 131 + (i >> 8)) & 0xFF for i in range(size))


def say(**fields):
    print(json.dumps(fields), flush=True)


async def wait_for(path, timeout=600):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the bench did not create {path}")
        await asyncio.sleep(0.005)


async def transfer(client, kind, amount, go_dir):
    slow = kind == "slow"
    size = 10 * 1024 * 1024 if slow else int(amount)
    data = pattern(size)
    deadline = time.monotonic() + float(amount) if slow else None
    response = kind != "command"
    say(event="start", kind=kind, at=time.monotonic_ns())
    sent = 0
    while sent < size and (deadline is None or time.monotonic() < deadline):
        piece = data[sent:sent + CHUNK]
        await client.write_gatt_char(CHARACTERISTIC, piece, response=response)
        sent += len(piece)
    say(event="sent", kind=kind, at=time.monotonic_ns(), bytes=sent)
    await wait_for(os.path.join(go_dir, kind))


async def connect_direct(address):
    from bleak import BleakClient, BleakScanner

    device = await BleakScanner.find_device_by_address(address, timeout=20.0)
    if device is None:
        raise RuntimeError(f"{address} not found on BlueZ")
    client = BleakClient(device, timeout=20.0)
    await client.connect()
    return client, client.disconnect


async def connect_proxy(address, port, key):
    import bleak
    import bleak_retry_connector
    import proxy_scanner  # bench/proxy_scanner.py, beside this file
    from aioesphomeapi import APIClient

    api = APIClient("127.0.0.1", int(port), None, noise_psk=key, client_info="gattway-bench-bulk")
    await api.connect(login=True)
    _, remove_scanner = await proxy_scanner.register_scanner(api)
    device = await proxy_scanner.device(address, 20)
    if device is None:
        raise RuntimeError(f"{address} not seen through the proxy")
    client = await bleak_retry_connector.establish_connection(bleak.BleakClient, device, "Bulk", max_attempts=3)

    async def close():
        await client.disconnect()
        remove_scanner()
        await api.disconnect()

    return client, close


async def main():
    mode, address, go_dir, kinds = sys.argv[1:5]
    if mode == "direct":
        client, close = await connect_direct(address)
    else:
        client, close = await connect_proxy(address, sys.argv[5], sys.argv[6])
    say(event="connected", at=time.monotonic_ns())
    for item in kinds.split(","):
        kind, amount = item.split(":")
        await transfer(client, kind, amount, go_dir)
    await close()
    say(event="done", at=time.monotonic_ns())


if __name__ == "__main__":
    asyncio.run(main())
