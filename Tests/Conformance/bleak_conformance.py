#!/usr/bin/env python3
"""bleak (unchanged, from PyPI) against `gattway simulate --scenario demo`.

Run by Tests/Conformance/run.sh with DBUS_SYSTEM_BUS_ADDRESS pointing at a private dbus-daemon on
which the simulator owns org.bluez. Prints PASS/FAIL per step; exits 1 on the first failure.
"""
import asyncio
import time
import warnings

from bleak import BleakClient, BleakScanner
from dbus_fast import BusType, Message
from dbus_fast.aio import MessageBus

from steps import Steps

BATTERY = "A4:C1:38:00:00:01"
ENV = "A4:C1:38:00:00:02"
LAMP = "A4:C1:38:00:00:03"
BTHOME = "A4:C1:38:00:00:04"
RUUVI = "C4:D3:8C:12:4A:5F"
HR = "A4:C1:38:00:00:06"
GARDEN = "A4:C1:38:00:00:08"  # BTHome, every 2 s, no rule of the demo config matches it
TAG = "F0:0D:00:00:00:07"  # manufacturer data no parser knows
BATTERY_SERVICE = "0000180f-0000-1000-8000-00805f9b34fb"
LEVEL = "00002a19-0000-1000-8000-00805f9b34fb"
LAMP_WRITE = "0000ff01-0000-1000-8000-00805f9b34fb"
LAMP_STATE = "0000ff02-0000-1000-8000-00805f9b34fb"

steps = Steps("conformance")
step = steps.step


async def control(method, signature, body):
    bus = await MessageBus(bus_type=BusType.SYSTEM).connect()
    try:
        reply = await bus.call(Message(destination="org.bluez", path="/io/gattway/Simulator",
                                       interface="io.gattway.Simulator1", member=method,
                                       signature=signature, body=body))
        return reply
    finally:
        bus.disconnect()


async def scan_like_theengs():
    """A scanner kept and started again, active, unfiltered but for DuplicateData, with the
    deprecated adapter keyword: how Theengs Gateway 1.8.0 scans (its ble_scan_loop)."""
    heard = {}

    def on_advertisement(device, adv):
        heard.setdefault(device.address, []).append(adv)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the adapter keyword, as Theengs passes it
        scanner = BleakScanner(on_advertisement, scanning_mode="active",
                               bluez={"filters": {"DuplicateData": True}}, adapter="hci0")
    everyone = sorted([BATTERY, ENV, LAMP, BTHOME, RUUVI, HR, GARDEN, TAG])
    for round_ in ("first", "second"):
        heard.clear()
        await scanner.start()
        await asyncio.sleep(3.5)  # the slowest advertiser sends every 2 s
        await scanner.stop()
        step(f"an unfiltered DuplicateData scan hears every advertiser ({round_} start)",
             sorted(heard) == everyone, f"heard {sorted(heard)}")
    bthome = "0000fcd2-0000-1000-8000-00805f9b34fb"
    step("its advertisement data: the BTHome service data",
         any(bthome in adv.service_data for adv in heard[BTHOME]), f"{heard[BTHOME][-1].service_data}")


async def main():
    started = time.monotonic()
    found = await BleakScanner.discover(timeout=3.0, service_uuids=[BATTERY_SERVICE], return_adv=True)
    addresses = sorted(found.keys())
    step("scan with a 180F service filter finds exactly the 180F advertisers",
         addresses == sorted([BATTERY, ENV, LAMP]), f"found {addresses}")
    step("the heart-rate-only device is not reported", HR not in addresses)
    device, adv = found[BATTERY]
    step("advertisement data: name, service UUIDs, RSSI",
         adv.local_name == "Battery Sensor" and BATTERY_SERVICE in adv.service_uuids and adv.rssi < 0,
         f"name={adv.local_name!r} uuids={adv.service_uuids} rssi={adv.rssi}")

    await scan_like_theengs()

    async with BleakClient(device, timeout=10.0) as client:
        step("connect", client.is_connected)
        services = {s.uuid for s in client.services}
        step("services listed (1801 and 180F exported, GAP 1800 hidden)",
             BATTERY_SERVICE in services and "00001801-0000-1000-8000-00805f9b34fb" in services
             and "00001800-0000-1000-8000-00805f9b34fb" not in services, f"{sorted(services)}")
        level = await client.read_gatt_char(LEVEL)
        step("read 2A19 battery level", len(level) == 1 and 0 <= level[0] <= 100, f"value={level.hex()}")

        received = []
        got_all = asyncio.Event()

        def on_notify(_, data):
            received.append(bytes(data))
            if len(received) >= 200:
                got_all.set()

        await client.start_notify(LEVEL, on_notify)
        await control("Burst", "ssud", [BATTERY, "2A19", 200, 0.0])
        try:
            await asyncio.wait_for(got_all.wait(), 10)
        except asyncio.TimeoutError:
            pass
        sequence = [int.from_bytes(v, "little") for v in received[:200] if len(v) == 4]
        step("notifications: a burst of 200 arrives complete and in order",
             sequence == list(range(200)), f"received {len(received)}")
        await client.stop_notify(LEVEL)

    step("disconnect", not client.is_connected)

    lamp = await BleakScanner.find_device_by_address(LAMP, timeout=5.0)
    step("find the lamp", lamp is not None)
    async with BleakClient(lamp, timeout=10.0) as client:
        await client.write_gatt_char(LAMP_WRITE, b"\x01", response=True)
        state = await client.read_gatt_char(LAMP_STATE)
        step("write with response (reflected into the lamp state)", bytes(state) == b"\x01", f"state={state.hex()}")
        await client.write_gatt_char(LAMP_WRITE, b"\x00", response=False)
        for _ in range(50):
            state = await client.read_gatt_char(LAMP_STATE)
            if bytes(state) == b"\x00":
                break
            await asyncio.sleep(0.02)
        step("write without response", bytes(state) == b"\x00", f"state={state.hex()}")
    step("disconnect the lamp", not client.is_connected)
    reply = await control("RecordedWrites", "", [])
    types = [w["Type"].value for w in reply.body[0] if w["Device"].value == LAMP]
    step("the simulator recorded both writes", types == ["request", "command"], f"{types}")
    print(f"all steps passed in {time.monotonic() - started:.1f} s", flush=True)
    steps.summary()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001 - report any bleak error as a failed step
        steps.unexpected(error)
