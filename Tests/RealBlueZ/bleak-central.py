#!/usr/bin/env python3
"""bleak (from PyPI, unchanged) as the central on hci0 against `gattway serve` on hci1, in the
real-BlueZ VM (Tests/RealBlueZ/guest-tests.sh, serve-tree.json). One "PASS|FAIL name detail" line
per check; exits 1 when any failed.
"""
import asyncio
import sys

from bleak import BleakClient, BleakScanner

SERVER = "00:AA:01:01:00:01"
BATTERY = "0000180f-0000-1000-8000-00805f9b34fb"
LEVEL = "00002a19-0000-1000-8000-00805f9b34fb"
VALUE = "0000ff11-0000-1000-8000-00805f9b34fb"
FAILING = "0000ff12-0000-1000-8000-00805f9b34fb"
failed = 0


def check(name, ok, detail=""):
    global failed
    failed += 0 if ok else 1
    print(f"{'PASS' if ok else 'FAIL'} serve.bleak-{name} {detail}", flush=True)
    return ok


async def main():
    # Generous: btvirt's controllers send one advertising report per scan start, which the kernel
    # now and then drops (see README): 90 s are eight scan windows.
    device = await BleakScanner.find_device_by_filter(
        lambda d, adv: d.address == SERVER and BATTERY in adv.service_uuids, timeout=90.0, bluez={"adapter": "hci0"})
    if not check("scan", device is not None, "found by its 180F advertisement"):
        return
    async with BleakClient(device, timeout=45.0, bluez={"adapter": "hci0"}) as client:
        services = sorted(s.uuid[4:8] for s in client.services)
        check("services", "180f" in services and "ff10" in services, f"{services}")
        level = await client.read_gatt_char(LEVEL)
        check("read", bytes(level) == b"\x4d", f"2A19={bytes(level).hex()}")
        await client.write_gatt_char(VALUE, b"\x21\x22", response=True)
        check("write-with-response", bytes(await client.read_gatt_char(VALUE)) == b"\x21\x22")
        await client.write_gatt_char(VALUE, b"\x23", response=False)
        back = b""
        for _ in range(50):
            back = bytes(await client.read_gatt_char(VALUE))
            if back == b"\x23":
                break
            await asyncio.sleep(0.1)
        check("write-without-response", back == b"\x23", f"read back {back.hex()}")
        try:
            await client.read_gatt_char(FAILING)
            check("read-error", False, "no error")
        except Exception as error:  # bleak raises BleakError with BlueZ's message
            check("read-error", "0x80" in str(error), str(error))
        received = asyncio.Queue()
        await client.start_notify(VALUE, lambda _, data: received.put_nowait(bytes(data)))
        await client.write_gatt_char(VALUE, b"\x24", response=True)
        try:
            value = await asyncio.wait_for(received.get(), 15)
            check("notify", value == b"\x24", f"notified {value.hex()} after our write")
        except asyncio.TimeoutError:
            check("notify", False, "no notification within 15 s")
        await client.stop_notify(VALUE)
    check("disconnect", not client.is_connected)


asyncio.run(main())
sys.exit(1 if failed else 0)
