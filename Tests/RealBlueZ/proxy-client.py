#!/usr/bin/env python3
"""Home Assistant's clients against the Bluetooth proxy of `gattway run`, in the real-BlueZ VM.

Run by Tests/RealBlueZ/guest-tests.sh with the python of .venv-esphome (aioesphomeapi,
bleak-esphome, habluetooth and dbus-fast, pinned in Tests/ESPHome/requirements.txt; passed in as
RBZ_ESPHOME_PYTHON), while `gattway run` serves the ESPHome API with bluetooth_proxy on the guest's
loopback, scanning hci0, and peripheral.py serves and advertises on hci1:

    proxy-client.py --port PORT --key BASE64 --name NODE [--nudge PID]
    proxy-client.py --checks          (the names of the checks, one a line)

Prints one "PASS|FAIL proxy.<name> detail" line per check (the guest script counts a missing
one as a FAIL). What bluetoothd exposes is read from the system bus with dbus-fast. --nudge is
peripheral.py's pid: btvirt's controllers send an advertising report only when scanning or
advertising starts, and a connect needs one, so while waiting for either the script asks
peripheral.py to advertise anew (SIGUSR1) every 10 s, as a real radio would repeat it.
"""
import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time

PERIPHERAL = "00:AA:01:01:00:01"
CENTRAL = "00:AA:01:00:00:00"
DEVICE_PATH = "/org/bluez/hci0/dev_" + PERIPHERAL.replace(":", "_")
BASE = "-0000-1000-8000-00805f9b34fb"
LEVEL, COMMAND, STATE = "00002a19" + BASE, "0000ff01" + BASE, "0000ff02" + BASE
CHECKS = [
    "device-info", "advertisement", "advertisement-bytes", "bleak-seen", "connect", "slots-taken", "services",
    "read", "write-with-response", "notify", "disconnect", "slots-freed", "bleak-connect", "bleak-services",
    "bleak-read", "bleak-write", "bleak-notify", "bleak-disconnect",
]
ADVERTISEMENT_WAIT = 45   # s: a report comes with each LE scan restart (~10 s) or nudge
CONNECT_WAIT = 60         # s: gattway's Device1.Connect has 20 s, then the services resolve
reported = set()
last_note = ""


def uptime():
    with open("/proc/uptime") as f:
        return f.read().split()[0]


def say(*words):
    print(f"[proxy-client {uptime()}]", *words, flush=True)


def note(text):
    """Why the checks after this point are not reached (their FAIL lines carry it)."""
    global last_note
    last_note = text
    say(text)


def check(name, ok, detail=""):
    assert name in CHECKS, name
    reported.add(name)
    line = f"{'PASS' if ok else 'FAIL'} proxy.{name} {detail}".replace("\n", " ")
    print(line[:400], flush=True)
    return bool(ok)


def mac_int(text):
    return int(text.replace(":", ""), 16)


def uuid128(text):
    text = text.lower()
    return f"0000{text}{BASE}" if len(text) == 4 else f"{text}{BASE}" if len(text) == 8 else text


def ad_structures(data):
    """(type, payload) of each AD structure."""
    out, i = [], 0
    while i < len(data) and data[i] != 0:
        out.append((data[i + 1], bytes(data[i + 2 : i + 1 + data[i]])))
        i += 1 + data[i]
    return out


def ad_fields(data):
    """What the AD bytes say, in Device1's terms."""
    fields = {"manufacturer": {}, "service_data": {}, "uuids": set(), "name": None, "tx_power": None}
    for kind, payload in ad_structures(data):
        if kind == 0xFF:
            fields["manufacturer"][int.from_bytes(payload[:2], "little")] = payload[2:]
        elif kind in (0x16, 0x20, 0x21):
            width = {0x16: 2, 0x20: 4, 0x21: 16}[kind]
            uuid = payload[:width][::-1].hex()
            fields["service_data"][uuid128(uuid) if width < 16 else str_uuid(uuid)] = payload[width:]
        elif kind in (0x02, 0x03, 0x04, 0x05, 0x06, 0x07):
            width = {0x02: 2, 0x03: 2, 0x04: 4, 0x05: 4, 0x06: 16, 0x07: 16}[kind]
            for i in range(0, len(payload), width):
                uuid = payload[i : i + width][::-1].hex()
                fields["uuids"].add(uuid128(uuid) if width < 16 else str_uuid(uuid))
        elif kind in (0x08, 0x09):
            fields["name"] = payload.decode(errors="replace")
        elif kind == 0x0A:
            fields["tx_power"] = int.from_bytes(payload[:1], "little", signed=True)
    return fields


def str_uuid(hex32):
    return f"{hex32[:8]}-{hex32[8:12]}-{hex32[12:16]}-{hex32[16:20]}-{hex32[20:]}"


class BlueZ:
    """bluetoothd's view, read on the system bus (dbus-fast)."""

    def __init__(self, bus):
        self.bus = bus

    @classmethod
    async def connect(cls):
        from dbus_fast import BusType
        from dbus_fast.aio import MessageBus
        return cls(await MessageBus(bus_type=BusType.SYSTEM).connect())

    async def call(self, path, interface, member, signature="", body=()):
        from dbus_fast import Message, MessageType
        reply = await self.bus.call(Message(destination="org.bluez", path=path, interface=interface, member=member,
                                            signature=signature, body=list(body)))
        if reply.message_type == MessageType.ERROR:
            raise RuntimeError(f"{member}: {reply.error_name} {reply.body}")
        return reply.body

    async def device(self):
        (props,) = await self.call(DEVICE_PATH, "org.freedesktop.DBus.Properties", "GetAll", "s", ["org.bluez.Device1"])
        return {key: variant.value for key, variant in props.items()}

    async def objects(self):
        (objects,) = await self.call("/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
        return objects

    async def connected(self):
        return bool((await self.device()).get("Connected"))


@contextlib.asynccontextmanager
async def nudging(pid, what):
    """While the body runs: SIGUSR1 to peripheral.py after 4 s, then every 10 s."""
    async def nudge():
        await asyncio.sleep(4)
        while True:
            if pid:
                say(f"nudge: peripheral.py advertises anew ({what})")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGUSR1)
            await asyncio.sleep(10)
    task = asyncio.create_task(nudge())
    try:
        yield
    finally:
        task.cancel()


async def wait_until(predicate, seconds, step=0.1):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(step)
    return bool(predicate())


async def gatt(client, bluez, address, mtu, free):
    """Connected through the proxy: slots, services, read, write, notify."""
    await wait_until(lambda: free and free[-1][0] < free[-1][1], 5)
    check("slots-taken", len(free) >= 2 and free[0][0] == free[0][1] and free[-1][0] == free[-1][1] - 1
          and free[-1][2] == [address], f"connections free (free, limit, allocated): {free}")
    services = await client.bluetooth_gatt_get_services(address)
    handles = {}
    for service in services.services:
        for characteristic in service.characteristics:
            handles[characteristic.uuid.lower()] = (service.handle, characteristic)
    uuids = sorted(s.uuid.lower()[4:8] for s in services.services)
    # The handles are those of bluetoothd's object paths (serviceXXXX/charYYYY).
    objects = await bluez.objects()
    paths = {uuid: f"{DEVICE_PATH}/service{s:04x}/char{c.handle:04x}" for uuid, (s, c) in handles.items()}
    missing = [p for p in paths.values() if p not in objects]
    level = handles.get(LEVEL, (0, None))[1]
    mtu_bluez = objects.get(paths.get(LEVEL), {}).get("org.bluez.GattCharacteristic1", {}).get("MTU")
    check("services", {"180f", "ff00"} <= set(uuids) and {LEVEL, COMMAND, STATE} <= set(handles) and not missing
          and level.properties & 0x12 == 0x12,
          f"{uuids}, {len(handles)} characteristics, 2A19 handle {level and level.handle:#06x} properties "
          f"{level and level.properties:#x}; paths bluetoothd lacks: {missing}; MTU {mtu} here, "
          f"{mtu_bluez and mtu_bluez.value} in bluetoothd's 2A19")
    if level is None or not {COMMAND, STATE} <= set(handles):
        note("2A19, FF01 or FF02 not listed")
        return
    value = bytes(await client.bluetooth_gatt_read(address, level.handle))
    # peripheral.py counts 100 … 1 every 200 ms.
    check("read", len(value) == 1 and 1 <= value[0] <= 100, f"2A19 = {value.hex()}")
    await client.bluetooth_gatt_write(address, handles[COMMAND][1].handle, b"\x5a", response=True)
    back = bytes(await client.bluetooth_gatt_read(address, handles[STATE][1].handle))
    check("write-with-response", back == b"\x5a", f"FF01 <- 5a, FF02 read back {back.hex()}")
    values = []
    stop_notify, _ = await client.bluetooth_gatt_start_notify(
        address, level.handle, lambda h, d: values.append((h, bytes(d))))
    await wait_until(lambda: len(values) >= 3, 15)
    await stop_notify()
    levels = [d[0] for h, d in values if h == level.handle and len(d) == 1]
    check("notify", len(values) >= 3 and len(levels) == len(values) and len(set(levels)) >= 2,
          f"{len(values)} notifications of 2A19 in <= 15 s: {levels[:8]}")


async def link_down(bluez, seconds=10):
    """Waits for bluetoothd's Connected false; returns the last value."""
    link = True
    deadline = time.monotonic() + seconds
    while link and time.monotonic() < deadline:
        link = await bluez.connected()
        if link:
            await asyncio.sleep(0.1)
    return link


async def bleak_esphome_session(device, bluez, free, nudge):
    """bleak.BleakClient (habluetooth's wrapper, bleak-esphome's backend) through the proxy."""
    import bleak
    import bleak_retry_connector

    started = time.monotonic()
    try:
        async with nudging(nudge, "bleak-esphome connect"):
            # One attempt (bleak-retry-connector's 20 s), as every check of the lane: nothing is retried.
            client = await bleak_retry_connector.establish_connection(bleak.BleakClient, device, "RBZ-Bat",
                                                                      max_attempts=1)
    except Exception as error:  # noqa: BLE001
        check("bleak-connect", False, f"after {time.monotonic() - started:.1f} s: {error!r}")
        note("bleak-esphome did not connect")
        return
    # Through the proxy, not around it: the proxy's slot is taken for the device.
    await wait_until(lambda: free and free[-1][0] == free[-1][1] - 1 and free[-1][2] == [mac_int(PERIPHERAL)], 5)
    check("bleak-connect", client.is_connected and free and free[-1][2] == [mac_int(PERIPHERAL)],
          f"after {time.monotonic() - started:.1f} s, connections free {free[-1] if free else None}")
    try:
        chars = {c.uuid for s in client.services for c in s.characteristics}
        check("bleak-services", {LEVEL, COMMAND, STATE} <= chars,
              f"{sorted(s.uuid[4:8] for s in client.services)}, {len(chars)} characteristics")
        value = bytes(await client.read_gatt_char(LEVEL))
        check("bleak-read", len(value) == 1 and 1 <= value[0] <= 100, f"2A19 = {value.hex()}")
        await client.write_gatt_char(COMMAND, b"\x5b", response=True)
        back = bytes(await client.read_gatt_char(STATE))
        check("bleak-write", back == b"\x5b", f"FF01 <- 5b with response, FF02 read back {back.hex()}")
        values = []
        await client.start_notify(LEVEL, lambda _, value: values.append(bytes(value)))
        await wait_until(lambda: len(values) >= 3, 15)
        await client.stop_notify(LEVEL)
        check("bleak-notify", len(values) >= 3 and len(set(values)) >= 2,
              f"{len(values)} notifications of 2A19 in <= 15 s: {[v.hex() for v in values[:8]]}")
    except Exception as error:  # noqa: BLE001
        note(f"bleak-esphome: {error!r}")
    started = time.monotonic()
    await client.disconnect()
    link = await link_down(bluez)
    await wait_until(lambda: free and free[-1][0] == free[-1][1], 5)
    check("bleak-disconnect", not client.is_connected and not link and free and free[-1][0] == free[-1][1],
          f"after {time.monotonic() - started:.1f} s: bluetoothd Connected {link}, "
          f"connections free {free[-1] if free else None}")


async def run(args):
    from aioesphomeapi import APIClient
    from aioesphomeapi.model import BluetoothProxyFeature
    import bleak_esphome
    import habluetooth

    bluez = await BlueZ.connect()
    address = mac_int(PERIPHERAL)

    # DeviceInfo as Home Assistant's ESPHome integration reads it.
    client = APIClient("127.0.0.1", args.port, None, noise_psk=args.key, client_info="rbz-proxy")
    await client.connect(login=True)
    info = await client.device_info()
    flags = info.bluetooth_proxy_feature_flags_compat(client.api_version)
    wanted = (BluetoothProxyFeature.PASSIVE_SCAN | BluetoothProxyFeature.ACTIVE_CONNECTIONS
              | BluetoothProxyFeature.REMOTE_CACHING | BluetoothProxyFeature.RAW_ADVERTISEMENTS)
    check("device-info", flags & wanted == wanted and info.name == args.name and info.bluetooth_mac_address == CENTRAL,
          f"name {info.name!r}, bluetooth MAC {info.bluetooth_mac_address}, feature flags {flags:#x} "
          f"(wanted {wanted:#x}: passive scan, active connections, remote caching, raw advertisements)")

    free = []
    client.subscribe_bluetooth_connections_free(lambda f, limit, allocated: free.append((f, limit, list(allocated))))
    seen = {}

    def on_advertisements(response):
        for adv in response.advertisements:
            if adv.address == address and address not in seen:
                seen[address] = (time.monotonic(), adv.address_type, adv.rssi, bytes(adv.data))

    # The bleak-esphome side, set up now so that the same report reaches Home Assistant's manager:
    # habluetooth's BluetoothManager (Home Assistant's, without Home Assistant) with the proxy as
    # a scanner, over a second API connection, as the esphome integration registers it.
    manager = habluetooth.BluetoothManager()
    await manager.async_setup()
    scanner_cli = APIClient("127.0.0.1", args.port, None, noise_psk=args.key, client_info="rbz-proxy-bleak")
    await scanner_cli.connect(login=True)
    scanner_info = await scanner_cli.device_info()
    data = bleak_esphome.connect_scanner(scanner_cli, scanner_info, True)
    unsetup = data.scanner.async_setup()
    unregister = habluetooth.get_manager().async_register_scanner(data.scanner)

    # Raw advertisements: peripheral.py's, with the fields bluetoothd keeps of it.
    subscribed = time.monotonic()
    client.subscribe_bluetooth_le_raw_advertisements(on_advertisements)
    async with nudging(args.nudge, "advertisement"):
        await wait_until(lambda: address in seen, ADVERTISEMENT_WAIT)
    if not check("advertisement", address in seen,
                 f"after {seen[address][0] - subscribed:.1f} s: type {seen[address][1]}, RSSI {seen[address][2]}, "
                 f"AD {seen[address][3].hex()}" if address in seen
                 else f"none from {PERIPHERAL} in {ADVERTISEMENT_WAIT} s"):
        check("advertisement-bytes", False, "no advertisement")
    else:
        _, address_type, rssi, raw = seen[address]
        fields = ad_fields(raw)
        device = await bluez.device()
        if args.radio == "mgmt":
            # The management path forwards the controller's own bytes: what peripheral.py
            # advertises (and its scan response, merged by the kernel), not bluetoothd's merged
            # Device1, whose UUIDs become the GATT services once a connection resolved them.
            expected = {
                "manufacturer": {0xFFFF: b"RBZ1"},
                "service_data": {uuid128("180f"): b"\x64"},
                "uuids": {uuid128("180f")},
                "name": "RBZ-Bat",
                "tx_power": None,
            }
        else:
            expected = {
                "manufacturer": {int(k): bytes(v.value) for k, v in device.get("ManufacturerData", {}).items()},
                "service_data": {k.lower(): bytes(v.value) for k, v in device.get("ServiceData", {}).items()},
                "uuids": {u.lower() for u in device.get("UUIDs", [])},
                "name": device.get("Name"),
                "tx_power": device.get("TxPower"),
            }
        differences = [key for key in expected if fields[key] != expected[key]]
        if address_type != (0 if device.get("AddressType") == "public" else 1):
            differences.append("address type")
        # -127 when bluetoothd has none, or 127 (HCI's "not available", what btvirt reports).
        if rssi != (-127 if device.get("RSSI", 127) == 127 else device["RSSI"]):
            differences.append(f"RSSI {rssi} vs {device.get('RSSI')}")
        advertised = (fields["manufacturer"].get(0xFFFF) == b"RBZ1"
                      and fields["service_data"].get(uuid128("180f")) == b"\x64" and uuid128("180f") in fields["uuids"])
        check("advertisement-bytes", not differences and advertised,
              f"as bluetoothd's Device1: manufacturer {fields['manufacturer']}, service data "
              f"{ {k[4:8]: v.hex() for k, v in fields['service_data'].items()} }, "
              f"UUIDs {sorted(u[4:8] for u in fields['uuids'])}, name {fields['name']!r}"
              if not differences and advertised else
              f"differ in {differences} (peripheral.py's FFFF RBZ1 / 180F 64 present: {advertised}): AD {fields}, "
              f"expected ({args.radio} path) {expected}")
    device = None
    await wait_until(lambda: habluetooth.get_manager().async_ble_device_from_address(PERIPHERAL, True), 5)
    device = habluetooth.get_manager().async_ble_device_from_address(PERIPHERAL, True)
    check("bleak-seen", device is not None,
          f"habluetooth knows {PERIPHERAL} as connectable through the proxy's scanner" if device
          else "habluetooth's manager has no connectable device")

    # A connection through the proxy with aioesphomeapi's calls (those bleak-esphome makes).
    states = []
    started = time.monotonic()
    try:
        async with nudging(args.nudge, "connect"):
            await client.bluetooth_device_connect(address, lambda c, m, e: states.append((c, m, e)),
                                                  timeout=CONNECT_WAIT, feature_flags=flags, address_type=0)
    except Exception as error:  # noqa: BLE001  (a timeout: the check says so)
        states.append((False, 0, repr(error)))
    connected, mtu, error = states[0] if states else (False, 0, None)
    check("connect", connected and mtu >= 23 and error == 0,
          f"after {time.monotonic() - started:.1f} s: connected {connected}, MTU {mtu}, error {error}")
    if connected:
        try:
            await gatt(client, bluez, address, mtu, free)
        except Exception as error:  # noqa: BLE001  (the checks not reached say so)
            note(f"GATT through the proxy: {error!r}")
        # Disconnect: the proxy answers connected false once BlueZ has disconnected.
        started = time.monotonic()
        try:
            await client.bluetooth_device_disconnect(address, timeout=30)
        except Exception as error:  # noqa: BLE001
            states.append((None, 0, repr(error)))
        link = await link_down(bluez)
        check("disconnect", len(states) > 1 and states[-1][0] is False and not link,
              f"after {time.monotonic() - started:.1f} s: states {states[1:]}, bluetoothd Connected {link}")
    else:
        note("not connected")
    await wait_until(lambda: free and free[-1][0] == free[-1][1], 5)
    check("slots-freed", free and free[-1][0] == free[-1][1] and not free[-1][2], f"connections free: {free[-3:]}")

    # bleak-esphome: bleak.BleakClient through habluetooth, connected with bleak-retry-connector as
    # Home Assistant's integrations do.
    device = habluetooth.get_manager().async_ble_device_from_address(PERIPHERAL, True) or device
    if device is None:
        note("habluetooth has no device")
    else:
        try:
            await bleak_esphome_session(device, bluez, free, args.nudge)
        except Exception as error:  # noqa: BLE001
            note(f"bleak-esphome: {error!r}")
    unregister()
    unsetup()
    manager.async_stop()
    await scanner_cli.disconnect()
    await client.disconnect()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checks", action="store_true", help="print the names of the checks and exit")
    parser.add_argument("--port", type=int, default=6053)
    parser.add_argument("--key")
    parser.add_argument("--name", default="rbz-proxy")
    parser.add_argument("--nudge", type=int, default=0, help="peripheral.py's pid (SIGUSR1: advertise anew)")
    parser.add_argument("--radio", choices=["mgmt", "dbus"], default="mgmt",
                        help="gattway's bluetooth.radio: what the forwarded AD bytes are compared with")
    args = parser.parse_args()
    if args.checks:
        print("\n".join(CHECKS))
        return 0
    try:
        asyncio.run(run(args))
    except Exception as error:  # noqa: BLE001
        say(f"stopped: {error!r}")
    for name in CHECKS:
        if name not in reported:
            check(name, False, f"not reached: {last_note}")
    return 0


sys.exit(main())
