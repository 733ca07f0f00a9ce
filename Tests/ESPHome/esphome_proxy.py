#!/usr/bin/env python3
"""The Bluetooth proxy of `gattway run` as Home Assistant sees it, through aioesphomeapi.

Run by Tests/ESPHome/run.sh (make test-esphome) with DBUS_SYSTEM_BUS_ADDRESS naming a private bus
on which the BlueZ simulator plays Tests/ESPHome/scenario.json. Starts a mosquitto and `gattway
run` with bluetooth_proxy enabled on loopback, then checks:
  1. enabled without encryption_key (and without plaintext) is a config error: exit 78;
  2. aioesphomeapi connects with the Noise key and reads DeviceInfo (name, proxy feature flags);
  3. a wrong key fails with InvalidEncryptionKeyAPIError, a plaintext client is refused;
  4. two clients subscribed to raw advertisements both receive the simulator's BTHome and Ruuvi
     advertisements, whose AD bytes match the service and manufacturer data BlueZ exposes
     (read with gdbus from the simulator's org.bluez); a third advertiser carries the simulator's
     monotonic clock, and the median time from its report to the client is at most 100 ms;
  5. hostile bytes (plaintext to the Noise server, a frame over the limit, a message instead of
     the handshake, garbage) each close their connection; the MQTT side keeps working:
     bridge/state online, and bridge/health counts the refused handshake, the oversize frame and
     the protocol errors in its bluetooth_proxy section;
  6. the proxy is announced as _esphomelib._tcp through Avahi's D-Bus API (fake_avahi.py stands
     in for avahi-daemon on the private bus), with the port, name and TXT record Home Assistant
     reads; an Avahi FAILURE is logged and the group freed; avahi-daemon stopped and started again
     (with another device on the network announcing the name): announced again, under Avahi's
     alternative "esphome-test #2", with a warning, DeviceInfo's name unchanged; withdrawn at the
     stop;
  7. `gattway doctor` finds the proxy answering with the configured key, Avahi, and the key; its
     avahi check names the announced name, and warns once it is "esphome-test #2";
  8. SIGTERM stops gattway with exit 0;
  9. connections through the proxy (connection_slots 2) with aioesphomeapi's own GATT calls, as
     bleak-esphome makes them for Home Assistant: DeviceInfo claims active connections and remote
     caching; a connect to the scenario's battery device answers connected with the MTU of BlueZ's
     characteristics; the
     services carry 180F/2A19 (with its 2901 descriptor) and FF00; read, the descriptor read, a
     write with and one without response (read back through reflect_writes_to), a descriptor write
     (the simulator records it), an ATT error
     (0x80) from a failing read, notifications of 2A19 after start_notify; the connections-free
     count follows; the deprecated V1 connect and a V3 connect without an address type are
     answered connected false, error 0, as ESPHome answers them, without taking a slot; a third
     connect beyond the two slots fails, and after a disconnect succeeds;
     a client that leaves the API frees its slots; an unknown address fails to connect;
 10. bleak-esphome, the bleak backend Home Assistant uses for proxied connections, with
     habluetooth's Bluetooth manager (as Home Assistant runs it, without Home Assistant): the
     proxy as a scanner, bleak.BleakClient to the battery device through it: services, read,
     writes with and without response, notifications, disconnect;
 11. one connection slot budget (a second gattway: bluetooth.max_connections 2, a connect: true
     device the gateway holds a link to, connection_slots 2): connections free says 1, the proxy
     connects one device (free 0) and is refused 0x80 for a second; the gateway's own device
     connects through the proxy on the gateway's slot and its link stays up after the proxy's
     disconnect; the count comes back after a disconnect; a gateway device added later waits
     while the proxy holds the last slot and connects when the proxy gives it back; the device
     connected first was connected by BlueZ before (its GATT objects cached without MTU) and its
     connect answers the MTU BlueZ sets silently; every name it could announce is taken (the
     first by another program on the machine): 11 tried, an error, the group freed, no mDNS;
 12. pair, unpair and clear cache with aioesphomeapi's calls: the flags; pairing needs a connection
     through the proxy (-1), pairs the battery device (BlueZ says Paired), again; clear cache of a
     paired device is refused (0x82); unpair answers success, then the link's end (0x16), BlueZ
     forgot the pairing; a peripheral that refuses to pair answers 0x89; clear cache of a
     connected unpaired device answers success, ends the link, the device is found again and
     connects with its services; clear cache of an unknown device succeeds; bleak-esphome's
     pair() pairs too;
 13. a bounded stop with everything outside frozen: a third gattway with the proxy announced
     through Avahi, a link of its own and a client's connection through the proxy; bluetoothd
     (the simulator), avahi-daemon (fake_avahi.py) and the broker stopped with SIGSTOP, then
     SIGTERM: exit 0 within 5 s (the Disconnects, Avahi's Free and the offline publish are cut
     short at the stop's deadline).
 14. the proxy on the management path (the simulator serves the kernel's management protocol,
     gattway reads it through GATTWAY_MGMT_SOCKET; bluetooth.scan_mode passive): the scanner
     state says PASSIVE, configured PASSIVE, and the forwarded advertisements are the passive
     scan's (the simulated devices send their name only in the scan response: no name); SetMode
     ACTIVE makes the radio active for real (mode ACTIVE, configured still PASSIVE; the reports
     carry the name again), SetMode PASSIVE returns it (clients without scanner modes, as
     aioesphomeapi 29.9.0: the state is not checked, the passive reports are). Then Home
     Assistant's Auto scanning as it drives it: bleak-esphome's scanner pinned to AUTO (the proxy
     told PASSIVE), habluetooth's active window (async_request_active_window, 4 s) turns the radio
     ACTIVE — the scanner's current mode follows the proxy's state, the name comes in the window —
     and PASSIVE again after it (bleak-esphome without Auto, as with 29.9.0: noted, not checked).
 15. keyless adoption (bluetooth_proxy.provisioning, no encryption_key): without a state directory
     it is a config error (exit 78); unprovisioned, the TXT record says api_provisioning=zero-psk
     (api_encryption_supported, no api_encryption), a wrong key and plaintext are refused, the
     all-zero key (aioesphomeapi's ZERO_NOISE_PSK) connects and DeviceInfo says provisionable;
     then, with a client that can set keys (noise_encryption_set_key; aioesphomeapi 29.9.0 cannot:
     it only connects with the zero key and reads DeviceInfo), the zero key and a malformed one
     are refused, a key is set (the file in the state directory, mode 0600, holds it), a second
     zero-key client's set-key afterwards is refused, the zero key is refused from then on and
     the new key connects, DeviceInfo and the re-announced TXT record say provisioned; after a
     restart the key still holds; a key rotation with the key; `gattway proxy reset-key` forgets
     it: unprovisioned again, with plaintext (plaintext: true), as Home Assistant adds a device:
     a set-key over plaintext is refused, over the zero key it is taken and plaintext is refused
     from then on; a configured encryption_key wins over a stored key (set-key refused).
Prints 'N passed, N failed' at the end; exits 1 on any failure.
"""
import asyncio
import base64
import importlib.metadata
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

from aioesphomeapi import APIClient
from aioesphomeapi.api_pb2 import BluetoothDeviceConnectionResponse, BluetoothDeviceRequest
from aioesphomeapi.core import InvalidEncryptionKeyAPIError, APIConnectionError, BluetoothGATTAPIError, TimeoutAPIError
from aioesphomeapi.model import BluetoothProxyFeature

ZERO_PSK = base64.b64encode(bytes(32)).decode()  # aioesphomeapi's ZERO_NOISE_PSK (newer clients export it)

try:  # Scanner state and mode (API 1.10 and newer clients); aioesphomeapi 29.9.0 does not know them.
    from aioesphomeapi.model import BluetoothScannerMode, BluetoothScannerState
except ImportError:
    BluetoothScannerMode = BluetoothScannerState = None

# bench/proxy_scanner.py: the proxy registered with habluetooth's manager, as the bench does it too.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))

GATTWAY = sys.argv[1]
BUS = os.environ["DBUS_SYSTEM_BUS_ADDRESS"]
KEY = base64.b64encode(bytes(range(32))).decode()
WRONG_KEY = base64.b64encode(bytes(range(1, 33))).decode()
BTHOME = "A4:C1:38:00:00:04"
RUUVI = "C4:D3:8C:12:4A:5F"
BATTERY = "A4:C1:38:00:00:10"
SPARE1 = "A4:C1:38:00:00:11"
SPARE2 = "A4:C1:38:00:00:12"
LOCK = "A4:C1:38:00:00:13"
GATEWAY_LINK = "A4:C1:38:00:00:20"
LATE = "A4:C1:38:00:00:21"

results = []
# Every BluetoothConnectionsFreeResponse any client of this lane received: (free, limit, allocated).
SLOT_REPORTS = []
CLIENT_VERSION = importlib.metadata.version("aioesphomeapi")


class WarningRecorder(logging.Handler):
    """Keeps the warnings of bleak-esphome and habluetooth (e.g. "Proxy slot accounting is
    inconsistent"), which Home Assistant would show in its log."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(f"{record.name}: {record.getMessage()}")


WARNINGS = WarningRecorder()
for logger_name in ("bleak_esphome", "habluetooth", "aioesphomeapi"):
    logging.getLogger(logger_name).addHandler(WARNINGS)


def slot_reports(into):
    """A connections-free callback that keeps each report in `into` and in SLOT_REPORTS."""
    def on_report(free, limit, allocated=()):
        report = (free, limit, list(allocated))
        into.append(report)
        SLOT_REPORTS.append(report)
    return on_report


def check(name, ok, detail=""):
    # bool(): a check whose condition ends in a number (the feature flags) counts as passed too.
    ok = bool(ok)
    results.append(ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mac_int(text):
    return int(text.replace(":", ""), 16)


def ad_structures(data):
    """(type, payload) of each AD structure."""
    out, i = [], 0
    while i < len(data) and data[i] != 0:
        length = data[i]
        out.append((data[i + 1], bytes(data[i + 2 : i + 1 + length])))
        i += 1 + length
    return out


def bluez_properties(address):
    """Device1 properties of the simulator's device as gdbus prints them."""
    path = "/org/bluez/hci0/dev_" + address.replace(":", "_")
    return subprocess.run(
        ["gdbus", "call", "--address", BUS, "--dest", "org.bluez", "--object-path", path, "--method",
         "org.freedesktop.DBus.Properties.GetAll", "org.bluez.Device1"],
        capture_output=True, text=True, check=True).stdout


def gatt_mtus(address):
    """(characteristics BlueZ exports for the device, the MTU values among their properties)."""
    path = "/org/bluez/hci0/dev_" + address.replace(":", "_")
    out = subprocess.run(["gdbus", "introspect", "--address", BUS, "--dest", "org.bluez", "--object-path", path,
                          "--recurse", "--only-properties"], capture_output=True, text=True).stdout
    return out.count("interface org.bluez.GattCharacteristic1"), [int(m) for m in re.findall(r"\bq MTU = (\d+);", out)]


def fake_avahi(record, *options):
    """fake_avahi.py on the private bus, recording into `record`; returns once it owns its name."""
    process = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "fake_avahi.py"), BUS,
                                record, *options])
    for _ in range(100):
        if os.path.exists(record):
            break
        time.sleep(0.1)
    return process


def avahi_control(method, *args):
    subprocess.run(["gdbus", "call", "--address", BUS, "--dest", "org.freedesktop.Avahi", "--object-path",
                    "/io/gattway/FakeAvahi", "--method", f"io.gattway.FakeAvahi1.{method}", *args],
                   capture_output=True, check=True)


def records(path):
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def wait_for(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.1)
    return predicate()


def log_text(log):
    log.seek(0)
    return log.read()


def run_gateway(path, config, log, env=None):
    """Writes `config` to `path` (mode 0600: it holds the key) and starts `gattway run` with it,
    its output going to `log` (`env`: more environment variables)."""
    with open(path, "w") as f:
        json.dump(config, f)
    os.chmod(path, 0o600)
    return subprocess.Popen([GATTWAY, "run", "--config", path, "--log-level", "debug"], stderr=log, stdout=log,
                            env=dict(os.environ, **(env or {})))


def doctor(config_path):
    run = subprocess.run([GATTWAY, "doctor", "--config", config_path, "--json"], capture_output=True, text=True)
    return {c["check"]: c for c in json.loads(run.stdout or "{}").get("checks", [])}


def gdbus_bytes(text):
    return bytes(int(x, 16) for x in re.findall(r"0x([0-9a-f]{2})", text))


def manufacturer_data(properties):
    return {int(company): gdbus_bytes(data)
            for company, data in re.findall(r"uint16 (\d+): <\[([^\]]*)\]>", properties)}


def service_data(properties):
    return {uuid: gdbus_bytes(data)
            for uuid, data in re.findall(r"'([0-9a-f-]{36})': <\[([^\]]*)\]>", properties)}


async def run_clients(port):
    # 2. The right key: DeviceInfo.
    client = APIClient("127.0.0.1", port, None, noise_psk=KEY, client_info="gattway-test")
    await client.connect(login=True)
    info = await client.device_info()
    flags = info.bluetooth_proxy_feature_flags_compat(client.api_version)
    check("DeviceInfo name", info.name == "esphome-test", info.name)
    check("DeviceInfo proxy flags: passive scan and raw advertisements",
          flags & BluetoothProxyFeature.PASSIVE_SCAN and flags & BluetoothProxyFeature.RAW_ADVERTISEMENTS, flags)
    check("DeviceInfo MAC is the adapter's", info.bluetooth_mac_address == "00:AA:01:00:00:00",
          info.bluetooth_mac_address)

    # 3. A wrong key and a plaintext client.
    wrong = APIClient("127.0.0.1", port, None, noise_psk=WRONG_KEY)
    try:
        await wrong.connect(login=True)
        check("a wrong key is refused", False, "connected")
    except InvalidEncryptionKeyAPIError:
        check("a wrong key is refused", True)
    except Exception as error:  # noqa: BLE001
        check("a wrong key is refused", False, repr(error))
    plain = APIClient("127.0.0.1", port, None)
    try:
        await plain.connect(login=True)
        check("a plaintext client is refused", False, "connected")
    except APIConnectionError:
        check("a plaintext client is refused", True)

    # 4. Two subscribers, each gets both advertisers.
    second = APIClient("127.0.0.1", port, None, noise_psk=KEY, client_info="gattway-test-2")
    await second.connect(login=True)
    seen = [{}, {}]

    latencies = []

    def collector(index):
        def on_advertisements(response):
            now = time.monotonic_ns()
            for adv in response.advertisements:
                data = bytes(adv.data)
                seen[index][adv.address] = (adv.address_type, adv.rssi, data)
                stamp = dict(ad_structures(data)).get(0xFF, b"")
                if index == 0 and len(stamp) == 10 and stamp[:2] == b"\xff\xff":
                    latencies.append((now - int.from_bytes(stamp[2:], "little")) / 1e6)
        return on_advertisements

    states = []
    if BluetoothScannerState is not None:
        client.subscribe_bluetooth_scanner_state(states.append)
    client.subscribe_bluetooth_le_raw_advertisements(collector(0))
    second.subscribe_bluetooth_le_raw_advertisements(collector(1))
    wanted = {mac_int(BTHOME), mac_int(RUUVI)}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not all(wanted <= set(s) for s in seen):
        await asyncio.sleep(0.1)
    if BluetoothScannerState is not None:
        check("scanner state: running, active",
              bool(states) and states[0].state == BluetoothScannerState.RUNNING
              and states[0].mode == BluetoothScannerMode.ACTIVE, states)
    else:
        print(f"note: aioesphomeapi {CLIENT_VERSION} has no scanner state; not checked", flush=True)
    if BluetoothScannerState is not None and hasattr(client, "bluetooth_scanner_set_mode"):
        # Home Assistant asks for passive: the proxy's scan switches, but on bluetoothd's D-Bus
        # view (this lane) there is no passive scan, so the true mode stays active; configured
        # mode: bluetooth.scan_mode's default, active. Asking for active again keeps it so.
        for asked in (BluetoothScannerMode.PASSIVE, BluetoothScannerMode.ACTIVE):
            before = len(states)
            client.bluetooth_scanner_set_mode(asked)
            until = time.monotonic() + 5
            while time.monotonic() < until and len(states) <= before:
                await asyncio.sleep(0.05)
            answers = states[before:]
            check(f"scanner set mode {asked.name}: answered with the true mode ACTIVE, configured ACTIVE",
                  bool(answers) and all(a.mode == BluetoothScannerMode.ACTIVE
                                        and getattr(a, "configured_mode", BluetoothScannerMode.ACTIVE)
                                        == BluetoothScannerMode.ACTIVE for a in answers), answers)
    for index in (0, 1):
        check(f"client {index + 1} received the BTHome and Ruuvi advertisements",
              wanted <= set(seen[index]), [hex(a) for a in seen[index]])
    if wanted <= set(seen[0]):
        bthome = dict(ad_structures(seen[0][mac_int(BTHOME)][2]))
        ruuvi = dict(ad_structures(seen[0][mac_int(RUUVI)][2]))
        expected_service = service_data(bluez_properties(BTHOME))["0000fcd2-0000-1000-8000-00805f9b34fb"]
        expected_ruuvi = manufacturer_data(bluez_properties(RUUVI))[0x0499]
        check("BTHome service data bytes match BlueZ's (FCD2, v2 device info 0x40)",
              bthome.get(0x16) == b"\xd2\xfc" + expected_service and expected_service[0] == 0x40,
              (bthome, expected_service))
        check("Ruuvi manufacturer data bytes match BlueZ's (0x0499, format 5)",
              ruuvi.get(0xFF) == b"\x99\x04" + expected_ruuvi and expected_ruuvi[0] == 0x05,
              (ruuvi, expected_ruuvi))
        check("names are carried (complete local name)",
              bthome.get(0x09) == b"BTHome TH" and ruuvi.get(0x09) == b"Ruuvi 4A5F", (bthome, ruuvi))
        check("address type and RSSI", seen[0][mac_int(RUUVI)][0] == 1 and seen[0][mac_int(BTHOME)][0] == 0
              and seen[0][mac_int(BTHOME)][1] == -66, seen[0])
        check("both clients got the same bytes", seen[0][mac_int(RUUVI)][2] == seen[1][mac_int(RUUVI)][2])
    # The simulator (another process) stamps its monotonic clock into the stamp device's reports;
    # time.monotonic_ns() reads the same clock. The median is the check (the bound is
    # 100 ms); the tail depends on the machine's load and is only printed.
    await asyncio.sleep(2)
    latencies.sort()
    median = latencies[len(latencies) // 2] if latencies else None
    tail = latencies[int(len(latencies) * 0.95)] if latencies else None
    check(f"advertisements reach the client promptly: median {median and round(median, 1)} ms, "
          f"p95 {tail and round(tail, 1)} ms over {len(latencies)}",
          median is not None and len(latencies) >= 20 and median <= 100, latencies[-5:])
    await client.disconnect()
    await second.disconnect()


async def connect_device(client, address, flags, timeout=30):
    """Connects through the proxy; returns (connected, mtu, error) of the first answer."""
    states = []
    await client.bluetooth_device_connect(mac_int(address), lambda c, m, e: states.append((c, m, e)),
                                          timeout=timeout, feature_flags=flags, address_type=0)
    return states[0] if states else (False, 0, None), states


async def raw_connect(client, address, **fields):
    """Sends a BluetoothDeviceRequest with exactly these fields (what aioesphomeapi's own call no
    longer sends) and returns the first BluetoothDeviceConnectionResponse for the address."""
    answer = asyncio.get_running_loop().create_future()

    def on_message(message):
        if message.address == address and not answer.done():
            answer.set_result(message)

    unsubscribe = client._get_connection().send_message_callback_response(
        BluetoothDeviceRequest(address=address, **fields), on_message, (BluetoothDeviceConnectionResponse,))
    try:
        return await asyncio.wait_for(answer, 5)
    except TimeoutError:
        return None
    finally:
        unsubscribe()


async def run_gatt(port):
    # 9. Connections through the proxy.
    client = APIClient("127.0.0.1", port, None, noise_psk=KEY, client_info="gattway-gatt")
    await client.connect(login=True)
    info = await client.device_info()
    flags = info.bluetooth_proxy_feature_flags_compat(client.api_version)
    check("DeviceInfo proxy flags: active connections and remote caching",
          flags & BluetoothProxyFeature.ACTIVE_CONNECTIONS and flags & BluetoothProxyFeature.REMOTE_CACHING, flags)
    free = []
    client.subscribe_bluetooth_connections_free(slot_reports(free))
    # The devices must be known to BlueZ: the proxy's own scan finds them (they advertise).
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and "Proxy Spare 2" not in bluez_properties(SPARE2):
        await asyncio.sleep(0.2)
    await asyncio.sleep(0.5)
    check("connections free: 2 of 2 at first", free and free[0][:2] == (2, 2), free)
    battery = mac_int(BATTERY)
    # The deprecated V1 connect (what aioesphomeapi before 38.0 sends to a proxy without remote
    # caching) and a V3 connect without an address type: answered at once as ESPHome answers them
    # (connected false, error 0), no slot taken.
    for label, fields in (("the deprecated V1 connect", dict(request_type=0, has_address_type=True)),
                          ("a V3 connect without an address type", dict(request_type=5))):
        answer = await raw_connect(client, battery, **fields)
        check(f"{label} is refused as ESPHome refuses it: connected false, error 0",
              answer is not None and not answer.connected and answer.error == 0 and answer.mtu == 0, answer)
    await asyncio.sleep(0.3)
    check("the refused connects took no slot", free and free[-1][:2] == (2, 2) and not free[-1][2], free)
    (connected, mtu, error), states = await connect_device(client, BATTERY, flags)
    _, mtus = gatt_mtus(BATTERY)
    check("connect through the proxy: connected, with the MTU BlueZ's characteristics say (517)",
          connected and error == 0 and mtus and set(mtus) == {mtu} and mtu == 517, (states, mtus))
    await asyncio.sleep(0.3)
    check("connections free: 1 of 2, the battery device allocated",
          free and free[-1][0] == 1 and battery in free[-1][2], free)
    services = await client.bluetooth_gatt_get_services(battery)
    by_uuid = {}
    for service in services.services:
        for characteristic in service.characteristics:
            by_uuid[characteristic.uuid[4:8].upper()] = characteristic
    service_uuids = sorted(service.uuid[4:8].upper() for service in services.services)
    check("services: 180F and FF00 with their characteristics",
          "180F" in service_uuids and "FF00" in service_uuids and {"2A19", "FF01", "FF02", "FF03"} <= set(by_uuid),
          (service_uuids, list(by_uuid)))
    level = by_uuid.get("2A19")
    if level is None:
        await client.disconnect()
        return
    check("2A19 properties: read and notify", level.properties & 0x02 and level.properties & 0x10, level.properties)
    value = await client.bluetooth_gatt_read(battery, level.handle)
    check("read 2A19 = 87", bytes(value) == b"\x57", value)
    user = [d for d in level.descriptors if d.uuid[4:8].upper() == "2901"]
    if user:
        text = await client.bluetooth_gatt_read_descriptor(battery, user[0].handle)
        check("read descriptor 2901 = Level", bytes(text) == b"Level", text)
    else:
        check("descriptor 2901 listed", False, level.descriptors)
    if user:
        await client.bluetooth_gatt_write_descriptor(battery, user[0].handle, b"Lvl")
        recorded = subprocess.run(
            ["gdbus", "call", "--address", BUS, "--dest", "org.bluez", "--object-path", "/io/gattway/Simulator",
             "--method", "io.gattway.Simulator1.RecordedWrites"], capture_output=True, text=True).stdout
        check("write descriptor 2901 reaches the peripheral", "'descriptor'" in recorded and "2901" in recorded,
              recorded[-400:])
    await client.bluetooth_gatt_write(battery, by_uuid["FF01"].handle, b"\x2a", response=True)
    echoed = await client.bluetooth_gatt_read(battery, by_uuid["FF02"].handle)
    check("write with response, read back through FF02", bytes(echoed) == b"\x2a", echoed)
    await client.bluetooth_gatt_write(battery, by_uuid["FF01"].handle, b"\x2b", response=False)
    await asyncio.sleep(0.3)
    echoed = await client.bluetooth_gatt_read(battery, by_uuid["FF02"].handle)
    check("write without response, read back through FF02", bytes(echoed) == b"\x2b", echoed)
    try:
        await client.bluetooth_gatt_read(battery, by_uuid["FF03"].handle)
        check("a failing read answers its ATT error", False, "read succeeded")
    except BluetoothGATTAPIError as failure:
        check("a failing read answers its ATT error (0x80)", failure.error.error == 0x80, failure.error)
    try:
        await client.bluetooth_gatt_read(battery, 0xFFF0)
        check("an unknown handle is an error", False, "read succeeded")
    except BluetoothGATTAPIError as failure:
        check("an unknown handle is an error (0x01)", failure.error.error == 0x01, failure.error)
    cccd = [d for d in level.descriptors if d.uuid[4:8].upper() == "2902"]
    if cccd:
        # bleak-esphome writes the CCCD itself when the proxy claims remote caching; BlueZ owns
        # it, so the proxy answers the write without passing it on.
        await client.bluetooth_gatt_write_descriptor(battery, cccd[0].handle, b"\x01\x00")
        check("a CCCD write is answered", True)
    else:
        check("the CCCD 2902 is listed", False, level.descriptors)
    values = []
    stop_notify, _ = await client.bluetooth_gatt_start_notify(battery, level.handle,
                                                              lambda h, d: values.append((h, bytes(d))))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(values) < 3:
        await asyncio.sleep(0.1)
    check("notifications of 2A19 arrive", len(values) >= 3 and all(h == level.handle for h, _ in values), values)
    await stop_notify()

    # Slots: two are offered; a third device is refused until one is disconnected.
    (connected, _, _), states = await connect_device(client, SPARE1, flags)
    check("a second connect takes the second slot", connected, states)
    (connected, _, error), states = await connect_device(client, SPARE2, flags)
    check("a third connect beyond 2 slots fails", not connected and error != 0, states)
    await client.bluetooth_device_disconnect(mac_int(SPARE1))
    await asyncio.sleep(0.3)
    check("a disconnect frees a slot", free and free[-1][0] == 1, free)
    (connected, _, _), states = await connect_device(client, SPARE2, flags)
    check("then the third device connects", connected, states)
    # The peer drops the link: the client hears connected false, the slot is free again.
    subprocess.run(["gdbus", "call", "--address", BUS, "--dest", "org.bluez", "--object-path", "/io/gattway/Simulator",
                    "--method", "io.gattway.Simulator1.Disconnect", SPARE2], capture_output=True, check=False)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not (len(states) > 1 and not states[-1][0]):
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.3)
    check("a link lost is reported: connected false with 0x13 (BlueZ 5.66 tells no reason), the slot free again",
          len(states) > 1 and not states[-1][0] and states[-1][2] == 0x13 and free and free[-1][0] == 1,
          (states, free[-1:]))
    # An address nobody hears: the proxy tries it as an ESP32 proxy does (the central waits for a
    # scan to see it, 20 s); the client gives up first, disconnects, and the slot is free again.
    try:
        (connected, _, error), states = await connect_device(client, "A4:C1:38:00:0F:FF", flags, timeout=2)
        check("an address nobody hears: the connect waits for it (as an ESP32's does)", False, states)
    except TimeoutAPIError as timeout:
        check("an address nobody hears: the connect waits for it (as an ESP32's does); the client's timeout "
              "ends it and the proxy answers its disconnect", "disconnect timed out: False" in str(timeout), timeout)
    await asyncio.sleep(0.3)
    check("an address nobody hears: its slot free again", free and free[-1][0] == 1, free[-1:])

    # A client that leaves the API frees its slots.
    await client.disconnect()
    other = APIClient("127.0.0.1", port, None, noise_psk=KEY, client_info="gattway-gatt-2")
    await other.connect(login=True)
    seen = []
    await asyncio.sleep(0.3)
    other.subscribe_bluetooth_connections_free(slot_reports(seen))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not (seen and seen[-1][0] == 2):
        await asyncio.sleep(0.1)
    check("a client gone from the API frees its slots", seen and seen[-1][:2] == (2, 2), seen)
    await other.disconnect()


def bluez_paired(address):
    """Device1.Paired of the simulator's device (False when BlueZ does not know it)."""
    try:
        return "'Paired': <true>" in bluez_properties(address)
    except subprocess.CalledProcessError:
        return False


async def run_pairing(port):
    # 12. Pair, unpair and clear cache with aioesphomeapi's own calls (bleak-esphome's pair(),
    # unpair() and clear_cache() make them).
    client = APIClient("127.0.0.1", port, None, noise_psk=KEY, client_info="gattway-pairing")
    await client.connect(login=True)
    info = await client.device_info()
    flags = info.bluetooth_proxy_feature_flags_compat(client.api_version)
    check("DeviceInfo proxy flags: pairing and cache clearing",
          flags & BluetoothProxyFeature.PAIRING and flags & BluetoothProxyFeature.CACHE_CLEARING, flags)
    battery = mac_int(BATTERY)
    result = await client.bluetooth_device_pair(battery)
    check("pair a device not connected through the proxy: refused (-1)", not result.paired and result.error == -1,
          result)
    (connected, _, _), states = await connect_device(client, BATTERY, flags)
    result = await client.bluetooth_device_pair(battery)
    check("pair the connected battery device: paired, and BlueZ says so (Device1.Pair, Just Works)",
          connected and result.paired and result.error == 0 and bluez_paired(BATTERY), (states, result))
    result = await client.bluetooth_device_pair(battery)
    check("pair it again: paired", result.paired and result.error == 0, result)
    result = await client.bluetooth_device_clear_cache(battery)
    check("clear the cache of a paired device: refused (0x82), still connected and paired",
          not result.success and result.error == 0x82 and bluez_connected(BATTERY) and bluez_paired(BATTERY), result)
    result = await client.bluetooth_device_unpair(battery)
    await wait_until(lambda: len(states) > 1, 5)
    check("unpair: success, then the link's end (connected false, 0x16)",
          result.success and result.error == 0 and states[-1] == (False, 0, 0x16), (result, states))
    check("unpair: BlueZ forgot the pairing (Adapter1.RemoveDevice)", not bluez_paired(BATTERY))
    # A peripheral that refuses to pair.
    (connected, _, _), states = await connect_device(client, LOCK, flags)
    result = await client.bluetooth_device_pair(mac_int(LOCK))
    check("a peripheral that refuses: not paired, ESP_GATT_AUTH_FAIL (0x89), still connected",
          connected and not result.paired and result.error == 0x89 and bluez_connected(LOCK), (states, result))
    await client.bluetooth_device_disconnect(mac_int(LOCK))
    # Clearing the cache of a connected device that is not paired: BlueZ forgets it, the link ends
    # after the answer, and the next connect discovers the services afresh.
    (connected, _, _), states = await connect_device(client, SPARE1, flags)
    result = await client.bluetooth_device_clear_cache(mac_int(SPARE1))
    await wait_until(lambda: len(states) > 1, 5)
    check("clear the cache of a connected, unpaired device: success, then the link's end (0x16)",
          connected and result.success and states[-1] == (False, 0, 0x16), (result, states))
    check("clear cache: BlueZ found the device again as a new one",
          await wait_until(lambda: "Proxy Spare 1" in bluez_properties_or_empty(SPARE1), 10))
    (connected, _, _), states = await connect_device(client, SPARE1, flags)
    services = await client.bluetooth_gatt_get_services(mac_int(SPARE1)) if connected else None
    check("clear cache: the device connects again and its services are discovered afresh",
          connected and services and any(s.uuid[4:8].upper() == "180F" for s in services.services), states)
    await client.bluetooth_device_disconnect(mac_int(SPARE1))
    result = await client.bluetooth_device_clear_cache(mac_int("A4:C1:38:00:0F:FE"))
    check("clear the cache of a device BlueZ does not know: success (nothing cached)", result.success, result)
    await client.disconnect()


def bluez_properties_or_empty(address):
    try:
        return bluez_properties(address)
    except subprocess.CalledProcessError:
        return ""


async def run_bleak(port):
    # 10. bleak-esphome through habluetooth, as Home Assistant connects through a proxy.
    import bleak
    import bleak_retry_connector
    import proxy_scanner

    cli = APIClient("127.0.0.1", port, None, noise_psk=KEY, client_info="gattway-bleak")
    await cli.connect(login=True)
    _, remove_scanner = await proxy_scanner.register_scanner(cli)
    device = await proxy_scanner.device(BATTERY, 10)
    check("bleak-esphome: the battery device is seen through the proxy", device is not None)
    if device is None:
        remove_scanner()
        await cli.disconnect()
        return
    level_uuid = "00002a19-0000-1000-8000-00805f9b34fb"
    ff01, ff02 = "0000ff01-0000-1000-8000-00805f9b34fb", "0000ff02-0000-1000-8000-00805f9b34fb"
    try:
        # As Home Assistant's integrations connect: bleak-retry-connector over habluetooth's
        # wrapped BleakClient, which picks the proxy as the connection path.
        client = await bleak_retry_connector.establish_connection(
            bleak.BleakClient, device, "Proxy Battery", max_attempts=1)
        check("bleak-esphome: connected through the proxy", client.is_connected)
        uuids = {c.uuid for s in client.services for c in s.characteristics}
        check("bleak-esphome: services", {level_uuid, ff01, ff02} <= uuids, uuids)
        level = await client.read_gatt_char(level_uuid)
        check("bleak-esphome: read 2A19", bytes(level) == b"\x57", level)
        await client.write_gatt_char(ff01, b"\x2c", response=True)
        echoed = await client.read_gatt_char(ff02)
        check("bleak-esphome: write with response", bytes(echoed) == b"\x2c", echoed)
        await client.write_gatt_char(ff01, b"\x2d", response=False)
        await asyncio.sleep(0.3)
        echoed = await client.read_gatt_char(ff02)
        check("bleak-esphome: write without response", bytes(echoed) == b"\x2d", echoed)
        values = []
        await client.start_notify(level_uuid, lambda _, value: values.append(bytes(value)))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(values) < 3:
            await asyncio.sleep(0.1)
        await client.stop_notify(level_uuid)
        check("bleak-esphome: notifications", len(values) >= 3 and set(values) == {b"\x57"}, values)
        await client.pair()
        check("bleak-esphome: pair (BlueZ says Paired)", bluez_paired(BATTERY))
        await client.disconnect()
        check("bleak-esphome: disconnected", not client.is_connected)
    except Exception as error:  # noqa: BLE001
        check("bleak-esphome: the connection through the proxy", False, repr(error))
    remove_scanner()
    await cli.disconnect()


def bluez_connected(address):
    """Device1.Connected of the simulator's device (False when BlueZ does not know it)."""
    try:
        return "'Connected': <true>" in bluez_properties(address)
    except subprocess.CalledProcessError:
        return False


async def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        await asyncio.sleep(0.1)
    return predicate()


async def run_scanner_modes(port):
    """14. The scanner mode on the management path; returns nothing, records checks."""
    client = APIClient("127.0.0.1", port, None, noise_psk=KEY, client_info="gattway-modes")
    await client.connect(login=True)
    states, names = [], []  # names: (time, the BTHome report's complete local name or None)

    def on_advertisements(response):
        for adv in response.advertisements:
            if adv.address == mac_int(BTHOME):
                names.append((time.monotonic(), dict(ad_structures(bytes(adv.data))).get(0x09)))

    modes = BluetoothScannerState is not None and hasattr(client, "bluetooth_scanner_set_mode")
    if modes:
        client.subscribe_bluetooth_scanner_state(states.append)
    client.subscribe_bluetooth_le_raw_advertisements(on_advertisements)

    async def reports_since(start, count=3):
        await wait_until(lambda: len([n for t, n in names if t > start]) >= count, 10)
        return [n for t, n in names if t > start]

    start = time.monotonic()
    passive = await reports_since(start)
    check("management path, scan_mode passive: BTHome's reports arrive without the scan response's name",
          len(passive) >= 3 and all(n is None for n in passive), passive[:5])
    if not modes:
        print(f"note: aioesphomeapi {CLIENT_VERSION} has no scanner modes; SetMode not checked", flush=True)
        await client.disconnect()
        return
    await wait_until(lambda: states, 5)
    check("scanner state on the management path: running, mode PASSIVE, configured PASSIVE",
          bool(states) and states[-1].state == BluetoothScannerState.RUNNING
          and states[-1].mode == BluetoothScannerMode.PASSIVE
          and states[-1].configured_mode == BluetoothScannerMode.PASSIVE, states)
    for asked, name_expected in ((BluetoothScannerMode.ACTIVE, True), (BluetoothScannerMode.PASSIVE, False)):
        client.bluetooth_scanner_set_mode(asked)
        switched = await wait_until(lambda asked=asked: states and states[-1].mode == asked, 10)
        check(f"SetMode {asked.name}: the scanner state says mode {asked.name}, configured PASSIVE",
              switched and states[-1].configured_mode == BluetoothScannerMode.PASSIVE, states[-3:])
        # Reports of the radio in the new mode: those after the state changed (one in flight may be older).
        await asyncio.sleep(0.3)
        after = await reports_since(time.monotonic())
        check(f"SetMode {asked.name}: BTHome's reports " + ("carry" if name_expected else "lack")
              + " the scan response's name, as the radio now scans " + asked.name.lower(),
              len(after) >= 3 and all((n == b"BTHome TH") if name_expected else (n is None) for n in after),
              after[:5])
    await client.disconnect()


async def run_auto_mode(port):
    """14b. Home Assistant's Auto scanning, driven as Home Assistant drives it: bleak-esphome's
    scanner pinned to AUTO (the proxy is told PASSIVE), then habluetooth's active window
    (async_request_active_window) turns the radio ACTIVE for its length and back; the scanner's
    current mode follows the proxy's scanner state, and the scan response's name comes only in
    the window. Returns nothing, records checks."""
    import proxy_scanner
    from habluetooth import BluetoothScanningMode

    cli = APIClient("127.0.0.1", port, None, noise_psk=KEY, client_info="gattway-auto")
    await cli.connect(login=True)
    names = []  # (time, the BTHome report's complete local name or None)

    def on_raw(scanner, response):
        scanner.async_on_raw_advertisements(response)
        for adv in response.advertisements:
            if adv.address == mac_int(BTHOME):
                names.append((time.monotonic(), dict(ad_structures(bytes(adv.data))).get(0x09)))

    scanner, remove_scanner = await proxy_scanner.register_scanner(cli, on_raw)
    if not hasattr(scanner, "async_request_active_window"):
        print(f"note: bleak-esphome of aioesphomeapi {CLIENT_VERSION} has no Auto mode; not checked", flush=True)
        remove_scanner()
        await cli.disconnect()
        return
    scanner.async_set_scanning_mode(BluetoothScanningMode.AUTO)
    check("Auto (bleak-esphome): pinned to AUTO, the proxy scans PASSIVE",
          await wait_until(lambda: scanner.current_mode == BluetoothScanningMode.PASSIVE, 10)
          and scanner.requested_mode == BluetoothScanningMode.AUTO,
          (scanner.requested_mode, scanner.current_mode))
    window = asyncio.ensure_future(scanner.async_request_active_window(4.0))
    active = await wait_until(lambda: scanner.current_mode == BluetoothScanningMode.ACTIVE, 3)
    check("Auto (bleak-esphome): the active window turns the proxy ACTIVE", active, scanner.current_mode)
    start = time.monotonic()
    await wait_until(lambda: any(n for t, n in names if t > start), 3.5)
    check("Auto (bleak-esphome): the scan response's name arrives during the window",
          any(n == b"BTHome TH" for t, n in names if t > start), [n for t, n in names if t > start][:5])
    opened = await window
    check("Auto (bleak-esphome): the window was taken (async_request_active_window returned True)", opened is True)
    check("Auto (bleak-esphome): back to PASSIVE after the window, still pinned to AUTO",
          await wait_until(lambda: scanner.current_mode == BluetoothScanningMode.PASSIVE, 10)
          and scanner.requested_mode == BluetoothScanningMode.AUTO, (scanner.requested_mode, scanner.current_mode))
    await asyncio.sleep(0.5)  # a report of the active scan may still be on its way
    mark = time.monotonic()
    await wait_until(lambda: len([n for t, n in names if t > mark]) >= 3, 5)
    after = [n for t, n in names if t > mark]
    check("Auto (bleak-esphome): after the window the reports lack the name again",
          len(after) >= 3 and all(n is None for n in after), after[:5])
    remove_scanner()
    await cli.disconnect()


async def run_frozen_stop(port, gateway, frozen):
    """13. Connects a client and a device through the proxy, freezes `frozen` (pids), sends SIGTERM;
    returns (set up, exit status, seconds from the signal to the exit)."""
    linked = await wait_until(lambda: bluez_connected(GATEWAY_LINK), 20)
    client = APIClient("127.0.0.1", port, None, noise_psk=KEY, client_info="gattway-frozen")
    await client.connect(login=True)
    info = await client.device_info()
    flags = info.bluetooth_proxy_feature_flags_compat(client.api_version)
    await wait_until(lambda: "Battery" in bluez_properties(BATTERY), 15)
    (connected, _, _), _ = await connect_device(client, BATTERY, flags)
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        gateway.send_signal(signal.SIGTERM)
        try:
            status = await asyncio.to_thread(gateway.wait, 20)
        except subprocess.TimeoutExpired:
            status = None
        seconds = time.monotonic() - start
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    try:
        await asyncio.wait_for(client.disconnect(), 5)
    except Exception:
        pass
    return linked and connected, status, seconds


async def run_shared(port):
    # 11. One slot budget: bluetooth.max_connections 2, the gateway holding a link to its
    # connect: true device; the proxy (connection_slots 2) gets the one slot left.
    check("shared budget: the gateway connected its device",
          await wait_until(lambda: bluez_connected(GATEWAY_LINK), 20))
    client = APIClient("127.0.0.1", port, None, noise_psk=KEY, client_info="gattway-shared")
    await client.connect(login=True)
    info = await client.device_info()
    flags = info.bluetooth_proxy_feature_flags_compat(client.api_version)
    free = []
    client.subscribe_bluetooth_connections_free(slot_reports(free))
    await wait_until(lambda: "Proxy Spare 2" in bluez_properties(SPARE2), 15)
    await asyncio.sleep(0.5)
    check("shared budget: connections free 1, limit 1 (the gateway holds a slot of max_connections 2; "
          "its links are not the proxy's, so the limit shrinks instead of an address allocated)",
          free and free[-1] == (1, 1, []), free)
    (connected, mtu, _), states = await connect_device(client, SPARE1, flags)
    await asyncio.sleep(0.3)
    check("shared budget: the proxy connects one device, connections free 0",
          connected and free and free[-1][0] == 0, (states, free[-1:]))
    # BlueZ connected this device before this gattway started (its GATT objects cached, without
    # MTU while disconnected) and set MTU silently on this connection: the answer has it all the same.
    _, mtus = gatt_mtus(SPARE1)
    check("a device BlueZ connected before: the connect answers the MTU BlueZ's characteristics say now (517)",
          connected and mtus and set(mtus) == {mtu} and mtu == 517, (states, mtus))
    (connected, _, error), states = await connect_device(client, SPARE2, flags)
    check("shared budget: a second device is refused at once with 0x80 although connection_slots is 2",
          not connected and error == 0x80, states)
    (connected, _, _), states = await connect_device(client, GATEWAY_LINK, flags)
    check("shared budget: the gateway's own device connects through the proxy on the gateway's slot", connected,
          states)
    if connected:
        value = await client.bluetooth_gatt_get_services(mac_int(GATEWAY_LINK))
        check("shared budget: its services through the proxy", any(s.uuid[4:8].upper() == "180F"
                                                                     for s in value.services), value)
        await client.bluetooth_device_disconnect(mac_int(GATEWAY_LINK))
        await asyncio.sleep(2.5)  # BlueZ's disconnect would take 2 s
        check("shared budget: the proxy's disconnect leaves the gateway's link up", bluez_connected(GATEWAY_LINK))
    await client.bluetooth_device_disconnect(mac_int(SPARE1))
    check("shared budget: after the proxy's disconnect the count comes back to 1",
          await wait_until(lambda: free and free[-1][0] == 1, 8), free[-3:])
    # A gateway device that waits for a slot gets the one the proxy gives back.
    (connected, _, _), states = await connect_device(client, SPARE1, flags)
    subprocess.run(["gdbus", "call", "--address", BUS, "--dest", "org.bluez", "--object-path", "/io/gattway/Simulator",
                    "--method", "io.gattway.Simulator1.AddDevice",
                    "'" + json.dumps({"address": LATE, "name": "Gateway Late", "interval": "200ms",
                                      "gatt": [{"uuid": "180F", "characteristics": [
                                          {"uuid": "2A19", "flags": ["read"], "value": {"hex": "41"}}]}]}) + "'"],
                   capture_output=True, check=False)
    await asyncio.sleep(2)
    check("shared budget: a second gateway device waits while the proxy holds the last slot",
          connected and not bluez_connected(LATE) and free and free[-1][0] == 0, (states, free[-1:]))
    await client.bluetooth_device_disconnect(mac_int(SPARE1))
    check("shared budget: the slot the proxy gave back goes to the waiting gateway device",
          await wait_until(lambda: bluez_connected(LATE), 10) and free[-1][0] == 0, free[-3:])
    await client.disconnect()


def hostile(port, payload):
    """Sends payload on a fresh connection; returns what came back before the server closed
    (None when it did not close within 5 s)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        received = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    return received
                received += chunk
        except (socket.timeout, ConnectionResetError):
            return None


async def try_connect(port, psk, name="gattway-keyless"):
    """(client, None) when the handshake and hello pass, else (None, the exception)."""
    client = APIClient("127.0.0.1", port, None, noise_psk=psk, client_info=name)
    try:
        await asyncio.wait_for(client.connect(login=True), 10)
        return client, None
    except Exception as error:  # noqa: BLE001
        return None, error


async def plaintext_refused(port, name):
    """Checks that a plaintext client is told the proxy requires encryption."""
    plain = APIClient("127.0.0.1", port, None)
    try:
        await asyncio.wait_for(plain.connect(login=True), 10)
        check(name, False, "connected")
    except APIConnectionError:
        check(name, True)


async def provisionable(port, psk):
    """DeviceInfo's api_encryption_provisionable through a session with `psk` (None: refused)."""
    client, _ = await try_connect(port, psk)
    if client is None:
        return None
    info = await client.device_info()
    await client.disconnect()
    return getattr(info, "api_encryption_provisionable", "unknown")


async def run_keyless(port, state):
    """15. An unprovisioned proxy provisioned by a client; returns whether the client can set keys."""
    key_file = f"{state}/esphome-api.key"
    wrong, error = await try_connect(port, WRONG_KEY)
    check("keyless: a wrong key is refused", wrong is None and isinstance(error, InvalidEncryptionKeyAPIError), error)
    await plaintext_refused(port, "keyless: plaintext is refused (plaintext is false)")
    first, error = await try_connect(port, ZERO_PSK)
    check("keyless: the all-zero key connects", first is not None, error)
    if first is None:
        return False
    info = await first.device_info()
    # aioesphomeapi 29.9.0 knows neither field: there only the name is read.
    check("keyless: DeviceInfo says encryption supported and provisionable",
          info.name == "esphome-keyless" and getattr(info, "api_encryption_supported", True)
          and getattr(info, "api_encryption_provisionable", True), info)
    if not hasattr(first, "noise_encryption_set_key"):
        print(f"note: aioesphomeapi {CLIENT_VERSION} has no noise_encryption_set_key: it connects to an unprovisioned "
              "proxy with the zero key but cannot provision it; not checked further", flush=True)
        await first.disconnect()
        return False
    second, _ = await try_connect(port, ZERO_PSK, "gattway-keyless-2")
    check("keyless: the all-zero key is refused as a key", await first.noise_encryption_set_key(
        ZERO_PSK.encode()) is False)
    check("keyless: a malformed key is refused", await first.noise_encryption_set_key(b"c2hvcnQ=") is False)
    check("keyless: nothing stored after refusals", not os.path.exists(key_file))
    new_key = base64.b64encode(bytes(range(100, 132)))
    check("keyless: a key is set (success)", await first.noise_encryption_set_key(new_key) is True)
    stored = open(key_file).read() if os.path.exists(key_file) else None
    mode = os.stat(key_file).st_mode & 0o777 if stored else None
    check("keyless: kept in the state directory, mode 0600", stored == new_key.decode() + "\n" and mode == 0o600,
          (stored, oct(mode or 0)))
    # Another client that connected with the zero key before: its key is no longer the proxy's.
    try:
        late = await asyncio.wait_for(second.noise_encryption_set_key(base64.b64encode(bytes(range(32)))), 5)
    except Exception as error:  # noqa: BLE001  (the proxy asks every client to go after a change)
        late = repr(error)
    check("keyless: a second zero-key client's set-key after the first is refused (or its session ended)",
          late is not True and open(key_file).read() == new_key.decode() + "\n", late)
    await asyncio.sleep(0.5)
    for client in (first, second):
        await client.disconnect(force=True)
    zero, error = await try_connect(port, ZERO_PSK)
    check("keyless: the zero key is refused once provisioned",
          zero is None and isinstance(error, InvalidEncryptionKeyAPIError), error)
    check("keyless: the new key connects; DeviceInfo: not provisionable",
          await provisionable(port, new_key.decode()) is False)
    return new_key.decode()


async def run_rotation(port, state, key):
    """A key rotation with the key (Home Assistant rotates keys this way); returns the new key."""
    client, error = await try_connect(port, key)
    check("after the restart the stored key connects, the zero key does not",
          client is not None and (await try_connect(port, ZERO_PSK))[0] is None, error)
    if client is None:
        return key
    rotated = base64.b64encode(bytes(range(50, 82)))
    check("rotation: a new key set with the key", await client.noise_encryption_set_key(rotated) is True)
    await asyncio.sleep(0.5)
    await client.disconnect(force=True)
    check("rotation: the new key connects, the old one is refused",
          await provisionable(port, rotated.decode()) is False and (await try_connect(port, key))[0] is None)
    return rotated.decode()


async def run_plaintext_adoption(port, state):
    """Unprovisioned with plaintext: true, as Home Assistant adds a device and then sets a key."""
    plain = APIClient("127.0.0.1", port, None, client_info="gattway-keyless-plain")
    try:
        await asyncio.wait_for(plain.connect(login=True), 10)
        info = await plain.device_info()
        check("plaintext while unprovisioned: connects, DeviceInfo provisionable",
              info.api_encryption_provisionable and info.api_encryption_supported, info)
        check("plaintext while unprovisioned: a set-key over plaintext is refused",
              await plain.noise_encryption_set_key(base64.b64encode(bytes(range(7, 39)))) is False)
    except Exception as error:  # noqa: BLE001
        check("plaintext while unprovisioned: connects, DeviceInfo provisionable", False, repr(error))
    zero, error = await try_connect(port, ZERO_PSK)
    key = base64.b64encode(bytes(range(9, 41)))
    check("plaintext while unprovisioned: the zero key sets a key",
          zero is not None and await zero.noise_encryption_set_key(key) is True, error)
    await asyncio.sleep(0.5)
    if zero is not None:
        await zero.disconnect(force=True)
    await plain.disconnect(force=True)
    await plaintext_refused(port, "provisioned: plaintext refused from then on")
    check("provisioned: the key connects", await provisionable(port, key.decode()) is False)
    return key.decode()


def keyless(work, config, avahi_record):
    """15. Keyless adoption."""
    state = f"{work}/keyless-state"
    port = free_port()
    proxy = {"enabled": True, "listen": f"127.0.0.1:{port}", "name": "esphome-keyless", "provisioning": True}
    keyless_config = dict(config, bluetooth_proxy=proxy)
    keyless_config["mqtt"] = dict(config["mqtt"], base_topic="esphomekeyless")
    with open(f"{work}/keyless-nostate.json", "w") as f:
        json.dump(keyless_config, f)
    code = subprocess.run([GATTWAY, "run", "--config", f"{work}/keyless-nostate.json"], capture_output=True,
                          text=True)
    check("provisioning without a state directory exits 78",
          code.returncode == 78 and "state directory" in code.stderr, (code.returncode, code.stderr[-400:]))
    keyless_config["state_directory"] = state
    path = f"{work}/keyless.json"
    log = open(f"{work}/gattway-keyless.log", "w+")

    def start(settings):
        log.seek(0, os.SEEK_END)
        count = log_text(log).count("ESPHome API on")
        process = run_gateway(path, dict(keyless_config, bluetooth_proxy=settings), log)
        wait_for(lambda: log_text(log).count("ESPHome API on") > count, 30)
        return process

    def stop(process, what):
        process.send_signal(signal.SIGTERM)
        check(f"keyless ({what}): SIGTERM: exit 0", process.wait(timeout=10) == 0, log_text(log)[-1500:])

    def txts():
        return [dict(t.split("=", 1) for t in c.get("txt", [])) for c in records(avahi_record)
                if c["call"] == "AddService" and c.get("name") == "esphome-keyless"]

    gateway = start(proxy)
    try:
        check("unprovisioned: logged as such", "unprovisioned: Noise with the all-zero key" in log_text(log),
              log_text(log)[-1500:])
        wait_for(lambda: txts(), 10)
        first = txts()[0] if txts() else {}
        check("unprovisioned: TXT api_provisioning=zero-psk and api_encryption_supported, no api_encryption",
              first.get("api_provisioning") == "zero-psk" and "api_encryption" not in first
              and first.get("api_encryption_supported") == "Noise_NNpsk0_25519_ChaChaPoly_SHA256", first)
        key = asyncio.run(run_keyless(port, state))
        if not key:
            return
        check("provisioned: the mDNS record announced again, api_encryption, no api_provisioning",
              wait_for(lambda: len(txts()) >= 2 and txts()[-1].get("api_encryption") and
                       "api_provisioning" not in txts()[-1], 10), txts())
        stop(gateway, "provisioned")
        gateway = start(proxy)
        check("restart: logged with the stored key", "the key a client set" in log_text(log), log_text(log)[-800:])
        check("restart: TXT announces encryption",
              wait_for(lambda: txts() and txts()[-1].get("api_encryption") and "api_provisioning" not in txts()[-1],
                       10), txts()[-1:])
        key = asyncio.run(run_rotation(port, state, key))
        stop(gateway, "rotated")
        reset = subprocess.run([GATTWAY, "proxy", "reset-key", "--config", path], capture_output=True, text=True)
        check("gattway proxy reset-key removes the stored key",
              reset.returncode == 0 and "removed" in reset.stdout and not os.path.exists(f"{state}/esphome-api.key"),
              (reset.returncode, reset.stdout, reset.stderr))
        gateway = start(dict(proxy, plaintext=True))
        check("after reset-key: unprovisioned again (the zero key connects, provisionable)",
              asyncio.run(provisionable(port, ZERO_PSK)) is True)
        key = asyncio.run(run_plaintext_adoption(port, state))
        stop(gateway, "plaintext adoption")
        gateway = start(dict(proxy, encryption_key=KEY))
        async def configured_wins():
            client, error = await try_connect(port, KEY)
            stored, _ = await try_connect(port, key)
            refused = client is not None and await client.noise_encryption_set_key(
                base64.b64encode(bytes(range(3, 35)))) is False
            if client is not None:
                await client.disconnect()
            return client is not None and stored is None and refused, error
        won, error = asyncio.run(configured_wins())
        check("a configured encryption_key wins over the stored key; set-key refused", won, error)
        stop(gateway, "configured key")
    finally:
        if gateway.poll() is None:
            gateway.kill()


def lan_safety(port):
    """Hostile bytes against the running proxy: each connection is closed (and counted)."""
    plain = hostile(port, b"\x00\x00\x07")
    check("a plaintext frame to the Noise server: told it encrypts, closed",
          plain is not None and plain.startswith(b"\x01") and b"Bad indicator byte" in plain, plain)
    big = hostile(port, b"\x01\x00\x00" + b"\x01\xff\xff" + bytes(1000))
    check("a frame over the size limit: closed", big is not None, big)
    early = hostile(port, b"\x01\x00\x00" + b"\x01\x00\x03\x05\x01\x02")
    check("a message instead of the handshake: closed", early is not None, early)
    garbage = hostile(port, bytes(range(7, 200)))
    check("garbage: closed", garbage is not None, garbage)


def mqtt_messages(port, topic, count, timeout=15):
    out = subprocess.run(
        ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-t", topic, "-C", str(count), "-W", str(timeout)],
        capture_output=True, text=True)
    return out.stdout.splitlines()


def main():
    print(f"clients: aioesphomeapi {CLIENT_VERSION}, bleak-esphome {importlib.metadata.version('bleak-esphome')}",
          flush=True)
    work = tempfile.mkdtemp(prefix="gattway-esphome.")
    mqtt_port, api_port = free_port(), free_port()
    with open(f"{work}/mosquitto.conf", "w") as f:
        f.write(f"listener {mqtt_port} 127.0.0.1\nallow_anonymous true\n")
    broker = subprocess.Popen(["mosquitto", "-c", f"{work}/mosquitto.conf"], stderr=subprocess.DEVNULL)
    config = {
        "mqtt": {"server": f"mqtt://127.0.0.1:{mqtt_port}", "base_topic": "esphometest"},
        "health": {"interval": "1s"},
        "bluetooth_proxy": {"enabled": True, "listen": f"127.0.0.1:{api_port}", "name": "esphome-test",
                            "encryption_key": KEY, "connection_slots": 2},
    }
    # 1. No key and no plaintext: a config error.
    with open(f"{work}/nokey.json", "w") as f:
        json.dump({"bluetooth_proxy": {"enabled": True}}, f)
    code = subprocess.run([GATTWAY, "run", "--config", f"{work}/nokey.json"], capture_output=True, text=True)
    check("enabled without encryption_key exits 78", code.returncode == 78 and "encryption_key" in code.stderr,
          (code.returncode, code.stderr))

    avahi_record = f"{work}/avahi.jsonl"
    avahi = fake_avahi(avahi_record)
    log = open(f"{work}/gattway.log", "w+")
    gateway = run_gateway(f"{work}/config.json", config, log)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            log.seek(0)
            if "ESPHome API on" in log.read():
                break
            time.sleep(0.1)
        asyncio.run(run_clients(api_port))
        asyncio.run(run_gatt(api_port))
        asyncio.run(run_pairing(api_port))
        asyncio.run(run_bleak(api_port))
        lan_safety(api_port)
        # 5. MQTT unchanged, and the refused handshake counted.
        state = mqtt_messages(mqtt_port, "esphometest/bridge/state", 1)
        check("MQTT bridge/state online", state and json.loads(state[0]).get("state") == "online", state)
        health = {}
        for _ in range(5):
            lines = mqtt_messages(mqtt_port, "esphometest/bridge/health", 1)
            health = json.loads(lines[0]).get("bluetooth_proxy", {}) if lines else {}
            closed = health.get("closed", {})
            if (closed.get("handshake", 0) >= 1 and closed.get("oversize", 0) >= 1 and closed.get("protocol", 0) >= 2
                    and closed.get("plaintext_probe", 0) >= 2):
                break
        closed = health.get("closed", {})
        # Protocol errors: the message instead of the handshake and the garbage; the plaintext
        # client and the plaintext frame are counted apart, as the probes they are.
        check("bridge/health counts the refused handshake, the oversize frame, the protocol errors and, apart, "
              "the plaintext probes",
              closed.get("handshake", 0) >= 1 and closed.get("oversize", 0) >= 1 and closed.get("protocol", 0) >= 2
              and closed.get("plaintext_probe", 0) >= 2 and health.get("advertisements_sent", 0) > 0, health)
        check("a plaintext probe is logged at info (<6>), never as a warning",
              "<6>API: 127.0.0.1" in log_text(log) and "a plaintext hello" in log_text(log)
              and not re.search(r"<[0-4]>API: [^\n]*(a plaintext hello|a plaintext frame)", log_text(log)),
              log_text(log)[-2000:])
        # Connected: battery, spare 1, spare 2 (aioesphomeapi), battery (bleak-esphome); refused:
        # beyond the slots (the address nobody hears is no failure: its client ended the wait).
        check("bridge/health counts the connections through the proxy",
              health.get("connections") == 0 and health.get("connects", 0) >= 4
              and health.get("connect_failures", 0) >= 1, health)
        # 7. gattway doctor's proxy checks against the running proxy.
        checks = doctor(f"{work}/config.json")
        for name in ("proxy", "avahi", "api key"):
            check(f"doctor: {name} ok", checks.get(name, {}).get("status") == "ok", checks.get(name))
        check("doctor: avahi says the proxy is announced as \"esphome-test\"",
              '"esphome-test"' in checks.get("avahi", {}).get("found", ""), checks.get("avahi"))
        # 6. The mDNS announcement.
        calls = records(avahi_record)
        added = [c for c in calls if c["call"] == "AddService"]
        service = added[0] if added else {}
        txt = dict(t.split("=", 1) for t in service.get("txt", []))
        check("announced as _esphomelib._tcp with name and port, on IPv4 (where it listens)",
              service.get("type") == "_esphomelib._tcp" and service.get("name") == "esphome-test"
              and service.get("port") == api_port and service.get("protocol") == 0, service)
        check("TXT: mac, version, api_encryption",
              txt.get("mac") == "00aa01000000" and txt.get("version") and
              txt.get("api_encryption") == "Noise_NNpsk0_25519_ChaChaPoly_SHA256", txt)
        check("committed and established once", [c["call"] for c in calls][1:] == ["AddService", "Commit", "state",
                                                                                   "state"]
              and calls[-1].get("state") == 2 and "announced by mDNS as _esphomelib._tcp \"esphome-test\""
              in log_text(log), calls)
        # Avahi reports a failure (the network went away): logged, the group freed.
        avahi_control("Fail")
        check("an Avahi FAILURE is logged as an error and the group freed",
              wait_for(lambda: "Avahi failed to announce \"esphome-test\" (Network is down)" in log_text(log), 10)
              and wait_for(lambda: records(avahi_record)[-1]["call"] == "Free", 5), records(avahi_record)[-3:])
        # avahi-daemon restarts, and meanwhile another device on the network announces the name:
        # the proxy is announced to the new daemon, under Avahi's alternative name.
        avahi.terminate()
        avahi.wait(timeout=10)
        check("avahi-daemon gone: logged",
              wait_for(lambda: "avahi-daemon left the system bus" in log_text(log), 10), log_text(log)[-600:])
        restarted_record = f"{work}/avahi-restarted.jsonl"
        avahi = fake_avahi(restarted_record, "--taken", "esphome-test")
        check("avahi-daemon back: the proxy is announced again, to the new daemon",
              wait_for(lambda: any(c["call"] == "Commit" for c in records(restarted_record)), 10),
              records(restarted_record))
        established = lambda: [c for c in records(restarted_record) if c["call"] == "state" and c["state"] == 2]
        wait_for(established, 10)
        names = [c["name"] for c in records(restarted_record) if c["call"] == "AddService"]
        check("a name another device announces (a collision): re-registered as Avahi's alternative \"esphome-test #2\"",
              names == ["esphome-test", "esphome-test #2"] and established()
              and established()[-1]["names"] == ["esphome-test #2"], records(restarted_record))
        text = log_text(log)
        check("the collision is a warning naming the new name and bluetooth_proxy.name",
              re.search(r'<4>Bluetooth proxy: the mDNS name "esphome-test" is taken \(another device on the network '
                        r'announces it\); announcing as "esphome-test #2" instead\. Set bluetooth_proxy\.name', text)
              is not None, text[-1500:])

        async def node_name():
            client = APIClient("127.0.0.1", api_port, None, noise_psk=KEY, client_info="gattway-name")
            await client.connect(login=True)
            info = await client.device_info()
            await client.disconnect()
            return info.name
        name = asyncio.run(node_name())
        check("the API still answers as \"esphome-test\" (only the mDNS instance name changed)",
              name == "esphome-test", name)
        checks = doctor(f"{work}/config.json")
        avahi_check = checks.get("avahi", {})
        check("doctor: avahi warns that the proxy is announced as \"esphome-test #2\", another device has the name",
              avahi_check.get("status") == "warn" and '"esphome-test #2"' in avahi_check.get("found", "")
              and "other-proxy.local" in avahi_check.get("found", "")
              and "bluetooth_proxy.name" in (avahi_check.get("fix") or ""), avahi_check)
        # 8. A clean stop, the announcement withdrawn.
        gateway.send_signal(signal.SIGTERM)
        check("SIGTERM: exit 0", gateway.wait(timeout=10) == 0)
        check("freed at the stop", records(restarted_record)[-1]["call"] == "Free", records(restarted_record)[-3:])
        # 11. The proxy's connections within the gateway's max_connections: a second gattway.
        shared_port = free_port()
        shared = dict(config, bluetooth={"max_connections": 2},
                      devices=[{"match": {"address": [GATEWAY_LINK, LATE]}, "connect": True}])
        shared["mqtt"] = dict(config["mqtt"], base_topic="esphomeshared")
        shared["bluetooth_proxy"] = dict(config["bluetooth_proxy"], listen=f"127.0.0.1:{shared_port}")
        # The device the shared budget connects first was connected by BlueZ before: its GATT
        # objects stay exported, without MTU while it is disconnected.
        characteristics, mtus = gatt_mtus(SPARE1)
        check("a device BlueZ connected before keeps its GATT objects, without MTU while disconnected",
              characteristics > 0 and not mtus and not bluez_connected(SPARE1), (characteristics, mtus))
        # Another program on this machine has registered the name (Avahi refuses it at once), and
        # every name the second gattway could take is announced by another device: it tries the
        # configured one and 10 alternatives, then goes on without mDNS.
        group = re.search(r"'(/[^']+)'", subprocess.run(
            ["gdbus", "call", "--address", BUS, "--dest", "org.freedesktop.Avahi", "--object-path", "/", "--method",
             "org.freedesktop.Avahi.Server.EntryGroupNew"], capture_output=True, text=True).stdout).group(1)
        subprocess.run(["gdbus", "call", "--address", BUS, "--dest", "org.freedesktop.Avahi", "--object-path", group,
                        "--method", "org.freedesktop.Avahi.EntryGroup.AddService", "--", "-1", "0", "0", "esphome-test",
                        "_esphomelib._tcp", "", "", "6053", "@aay []"], capture_output=True, check=True)
        avahi_control("Take", "esphome-test", "true")
        before = len(records(restarted_record))
        log.seek(0, os.SEEK_END)
        gateway = run_gateway(f"{work}/shared.json", shared, log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            log.seek(0)
            if log.read().count("ESPHome API on") >= 2:
                break
            time.sleep(0.1)
        check("a name another program on this machine has is refused by Avahi: the next one is tried",
              wait_for(lambda: 'the mDNS name "esphome-test" is taken (another program on this machine announces it); '
                               'announcing as "esphome-test #2"' in log_text(log), 15), log_text(log)[-1500:])
        gave_up = "mDNS name collision: \"esphome-test\" and its 10 alternatives (the last \"esphome-test #11\""
        check("collisions are bounded: an error after the configured name and 10 alternatives",
              wait_for(lambda: gave_up in log_text(log), 15), log_text(log)[-1500:])
        # The error is logged as the group is freed: the Free call may reach Avahi a moment later.
        wait_for(lambda: (records(restarted_record) or [{}])[-1].get("call") == "Free", 5)
        tried = [c for c in records(restarted_record)[before:]]
        check("11 names tried, then the group freed; the proxy serves on without mDNS",
              [c["name"] for c in tried if c["call"] == "AddService"]
              == ["esphome-test"] + [f"esphome-test #{n}" for n in range(2, 12)]
              and tried[-1]["call"] == "Free" and not any(c["call"] == "state" and c["state"] == 2 for c in tried),
              tried[-4:])
        asyncio.run(run_shared(shared_port))
        gateway.send_signal(signal.SIGTERM)
        check("shared budget: SIGTERM: exit 0", gateway.wait(timeout=10) == 0)
        # 13. The stop's bound with bluetoothd, avahi-daemon and the broker frozen.
        frozen_port = free_port()
        frozen_config = dict(config, devices=[{"match": {"address": [GATEWAY_LINK]}, "connect": True}])
        frozen_config["mqtt"] = dict(config["mqtt"], base_topic="esphomefrozen")
        frozen_config["bluetooth_proxy"] = dict(config["bluetooth_proxy"], listen=f"127.0.0.1:{frozen_port}",
                                                name="esphome-frozen")
        frozen_log = open(f"{work}/gattway-frozen.log", "w+")
        gateway = run_gateway(f"{work}/frozen.json", frozen_config, frozen_log)
        announced = wait_for(lambda: any(c["call"] == "state" and c["state"] == 2 and c["names"] == ["esphome-frozen"]
                                         for c in records(restarted_record)), 30)
        simulator = int(os.environ.get("BLUEZ_SIMULATOR_PID", "0"))
        set_up, status, seconds = asyncio.run(run_frozen_stop(
            frozen_port, gateway, [pid for pid in (simulator, avahi.pid, broker.pid) if pid]))
        text = log_text(frozen_log)
        check("frozen stop: announced through Avahi, the gateway's link and a connection through the proxy up",
              announced and set_up and simulator, (announced, set_up, simulator, text[-1500:]))
        check("SIGTERM with bluetoothd, avahi-daemon and the broker frozen (SIGSTOP): exit 0 within 5 s",
              status == 0 and seconds <= 5 and "<5>stopped in " in text and "stopping took longer" not in text,
              (status, round(seconds, 2), text[-1500:]))
        # 14. The proxy on the management path, its scanner mode switched for real.
        mgmt_socket = os.environ.get("SIMULATOR_MGMT_SOCKET", "")
        check("the simulator serves the management protocol (run.sh sets WITH_MGMT_SOCKET)",
              mgmt_socket and os.path.exists(mgmt_socket), mgmt_socket)
        modes_port = free_port()
        modes_config = dict(config, bluetooth={"radio": "mgmt", "scan_mode": "passive"})
        modes_config["mqtt"] = dict(config["mqtt"], base_topic="esphomemodes")
        modes_config["bluetooth_proxy"] = dict(config["bluetooth_proxy"], listen=f"127.0.0.1:{modes_port}",
                                               name="esphome-modes")
        modes_log = open(f"{work}/gattway-modes.log", "w+")
        gateway = run_gateway(f"{work}/modes.json", modes_config, modes_log, {"GATTWAY_MGMT_SOCKET": mgmt_socket})
        check("management path: gattway reads the served socket",
              wait_for(lambda: "ESPHome API on" in log_text(modes_log), 30)
              and wait_for(lambda: f"radio: the management socket at {mgmt_socket}" in log_text(modes_log), 10),
              log_text(modes_log)[-1500:])
        asyncio.run(run_scanner_modes(modes_port))
        asyncio.run(run_auto_mode(modes_port))
        gateway.send_signal(signal.SIGTERM)
        check("management path: SIGTERM: exit 0", gateway.wait(timeout=10) == 0, log_text(modes_log)[-1500:])
        # 15. Keyless adoption.
        keyless(work, config, restarted_record)
        # bleak-esphome trusts the allocated list only when it adds up (Home Assistant's recovery
        # of lost disconnects depends on it).
        inconsistent = [r for r in SLOT_REPORTS if len(r[2]) != r[1] - r[0]]
        check(f"every connections-free report adds up: allocated = limit - free ({len(SLOT_REPORTS)} reports)",
              SLOT_REPORTS and not inconsistent, inconsistent[:5])
        check("no warning from bleak-esphome, habluetooth or aioesphomeapi",
              not [w for w in WARNINGS.lines if "inconsistent" in w or "Timeout" in w], WARNINGS.lines[:10])
    finally:
        avahi.terminate()
        if gateway.poll() is None:
            gateway.kill()
        broker.terminate()
        broker.wait()
        log.seek(0)
        text = log.read()
        if not all(results):
            print("--- gattway log ---\n" + text[-6000:])
    print(f"{results.count(True)} passed, {results.count(False)} failed")
    sys.exit(0 if all(results) else 1)


main()
