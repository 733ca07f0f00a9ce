"""gattway_probe: a test instrument of make test-homeassistant, not part of gattway.

Home Assistant has no stock integration that connects to an arbitrary Bluetooth device, so this
one does what such an integration does: the service gattway_probe.read looks the device up with
bluetooth.async_ble_device_from_address(connectable=True), connects with
bleak_retry_connector.establish_connection and a BleakClient (Home Assistant's wrapper routes it
to the scanner that heard the device: here the ESPHome proxy, through bleak-esphome and
aioesphomeapi), reads one characteristic and disconnects. The answer is the service response:
the value in hex, the backend bleak used and the scanner the device was heard by.
"""

from __future__ import annotations

import voluptuous as vol
from bleak import BleakClient
from bleak_retry_connector import establish_connection

from homeassistant.components import bluetooth
from homeassistant.core import HomeAssistant, ServiceCall, ServiceResponse, SupportsResponse
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import config_validation as cv
from homeassistant.helpers.typing import ConfigType

DOMAIN = "gattway_probe"
CONFIG_SCHEMA = cv.empty_config_schema(DOMAIN)
READ_SCHEMA = vol.Schema({vol.Required("address"): cv.string, vol.Required("characteristic"): cv.string})


async def async_setup(hass: HomeAssistant, config: ConfigType) -> bool:
    """Registers gattway_probe.read."""

    async def read(call: ServiceCall) -> ServiceResponse:
        address = call.data["address"].upper()
        device = bluetooth.async_ble_device_from_address(hass, address, connectable=True)
        if device is None:
            raise HomeAssistantError(f"{address} is not known to any connectable scanner")
        service_info = bluetooth.async_last_service_info(hass, address, connectable=True)
        client = await establish_connection(BleakClient, device, DOMAIN, max_attempts=2)
        try:
            value = await client.read_gatt_char(call.data["characteristic"])
            backend = type(client._backend).__module__  # noqa: SLF001 - which bleak backend carried it
        finally:
            await client.disconnect()
        return {
            "value": bytes(value).hex(),
            "backend": backend,
            "source": service_info.source if service_info else None,
        }

    hass.services.async_register(DOMAIN, "read", read, schema=READ_SCHEMA,
                                 supports_response=SupportsResponse.ONLY)
    return True
