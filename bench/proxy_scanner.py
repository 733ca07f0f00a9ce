"""The Bluetooth proxy of `gattway run` as a scanner of habluetooth's Bluetooth manager, as Home
Assistant's esphome integration registers a proxy: bleak-esphome's scanner, fed the proxy's raw
advertisements. Shared by bench/bulk_transfer.py and the ESPHome lane (Tests/ESPHome/esphome_proxy.py,
which imports it from here: the bench imports no test code). Needs aioesphomeapi, bleak-esphome and
habluetooth (.venv-esphome).
"""
import asyncio
import time

import bleak_esphome
import habluetooth


async def register_scanner(api, on_raw=None):
    """Sets up habluetooth's manager on this event loop and registers the proxy `api` (an
    aioesphomeapi APIClient, connected) with it as a scanner. The proxy's raw advertisements go to
    the scanner, through `on_raw(scanner, response)` when given. Returns (scanner, remove)."""
    await habluetooth.BluetoothManager().async_setup()
    info = await api.device_info()
    scanner = bleak_esphome.connect_scanner(api, info, True).scanner
    unsetup = scanner.async_setup()
    unregister = habluetooth.get_manager().async_register_scanner(scanner)
    if on_raw is None:
        api.subscribe_bluetooth_le_raw_advertisements(scanner.async_on_raw_advertisements)
    else:
        api.subscribe_bluetooth_le_raw_advertisements(lambda response: on_raw(scanner, response))

    def remove():
        unsetup()
        unregister()

    return scanner, remove


async def device(address, timeout):
    """habluetooth's BLEDevice for `address` once a registered scanner reported it (connectable);
    None after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = habluetooth.get_manager().async_ble_device_from_address(address, True)
        if found is not None:
            return found
        await asyncio.sleep(0.1)
    return None
