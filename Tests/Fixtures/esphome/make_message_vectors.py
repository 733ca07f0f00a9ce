#!/usr/bin/env python3
"""Writes message-vectors.json: ESPHome API messages encoded by the protobuf classes aioesphomeapi
ships (api_pb2, generated from api.proto by Google's protobuf, pinned in
Tests/ESPHome/requirements.txt), so ESPHomeAPITests can check gattway's own encoder (server
messages: byte for byte) and decoder (client messages: field values) against an independent one.

Run:
  .venv-esphome/bin/python Tests/Fixtures/esphome/make_message_vectors.py > Tests/Fixtures/esphome/message-vectors.json
"""
import json

from aioesphomeapi import api_pb2 as pb

SIG = "-0000-1000-8000-00805f9b34fb"
CUSTOM = 0x6E400001B5A3F393E0A9E50E24DCCA9E  # the Nordic UART service UUID


def split(value):
    return [value >> 64, value & ((1 << 64) - 1)]


def services(short):
    def uuid(message, value16, long_value=None):
        if long_value is not None:
            message.uuid.extend(split(long_value))
        elif short:
            message.short_uuid = value16
        else:
            message.uuid.extend(split((value16 << 96) | 0x00001000_800000805F9B34FB))
    response = pb.BluetoothGATTGetServicesResponse(address=0xA4C138000001)
    battery = response.services.add(handle=10)
    uuid(battery, 0x180F)
    level = battery.characteristics.add(handle=11, properties=0x12)
    uuid(level, 0x2A19)
    cccd = level.descriptors.add(handle=13)
    uuid(cccd, 0x2902)
    uart = response.services.add(handle=20)
    uuid(uart, 0, CUSTOM)
    rx = uart.characteristics.add(handle=21, properties=0x0C)
    uuid(rx, 0, CUSTOM + 1)
    return response


server = {
    "hello_response": pb.HelloResponse(api_version_major=1, api_version_minor=14, server_info="gattway 1.2.3",
                                       name="pi-proxy"),
    "device_info_response": pb.DeviceInfoResponse(
        name="pi-proxy", mac_address="AA:BB:CC:DD:EE:FF", esphome_version="2025.8.0",
        compilation_time="Dec  2 2026", model="gattway", project_name="gattway.gattway", project_version="1.2.3",
        manufacturer="gattway", friendly_name="Pi Proxy", bluetooth_proxy_feature_flags=97,
        bluetooth_mac_address="AA:BB:CC:DD:EE:FF", api_encryption_supported=True),
    "raw_advertisements": pb.BluetoothLERawAdvertisementsResponse(advertisements=[
        pb.BluetoothLERawAdvertisement(address=0xC4D38C124A5F, rssi=-72, address_type=1,
                                       data=bytes.fromhex("0201061aff9904")),
        pb.BluetoothLERawAdvertisement(address=0xA4C138000004, rssi=-6, address_type=0,
                                       data=bytes.fromhex("0416d2fc40")),
    ]),
    "connections_free": pb.BluetoothConnectionsFreeResponse(free=2, limit=3, allocated=[0xA4C138000001]),
    "scanner_state": pb.BluetoothScannerStateResponse(state=2, mode=1, configured_mode=1),
    "device_connection": pb.BluetoothDeviceConnectionResponse(address=0xA4C138000001, connected=False, error=0x85),
    "gatt_services_short": services(True),
    "gatt_services_long": services(False),
    "gatt_read": pb.BluetoothGATTReadResponse(address=0xA4C138000001, handle=11, data=b"\x5d"),
    "gatt_error": pb.BluetoothGATTErrorResponse(address=0xA4C138000001, handle=11, error=-1),
    "gatt_notify_data": pb.BluetoothGATTNotifyDataResponse(address=0xA4C138000001, handle=11, data=b"\x01\x02"),
    "device_pairing": pb.BluetoothDevicePairingResponse(address=0xA4C138000001, paired=True),
    "device_pairing_failed": pb.BluetoothDevicePairingResponse(address=0xA4C138000001, paired=False, error=-1),
    "device_unpairing": pb.BluetoothDeviceUnpairingResponse(address=0xA4C138000001, success=True),
    "device_clear_cache_refused": pb.BluetoothDeviceClearCacheResponse(address=0xA4C138000001, success=False,
                                                                       error=0x82),
}

client = {
    "hello_request": pb.HelloRequest(client_info="Home Assistant 2026.11", api_version_major=1, api_version_minor=15),
    "subscribe_raw": pb.SubscribeBluetoothLEAdvertisementsRequest(flags=1),
    "device_request": pb.BluetoothDeviceRequest(address=0xA4C138000001, request_type=4, has_address_type=True,
                                                address_type=1),
    # The deprecated V1 connect (aioesphomeapi before 38.0 to a proxy without remote caching) and a
    # V3 connect without an address type (aioesphomeapi before 39.0.1 when its caller gave none).
    "device_request_v1": pb.BluetoothDeviceRequest(address=0xA4C138000001, request_type=0, has_address_type=True,
                                                   address_type=1),
    "device_request_no_type": pb.BluetoothDeviceRequest(address=0xA4C138000001, request_type=5),
    "device_request_pair": pb.BluetoothDeviceRequest(address=0xA4C138000001, request_type=2),
    "device_request_clear_cache": pb.BluetoothDeviceRequest(address=0xA4C138000001, request_type=6),
    "get_time_response": pb.GetTimeResponse(epoch_seconds=1795000000, timezone="CET-1CEST,M3.5.0,M10.5.0/3"),
    "gatt_get_services": pb.BluetoothGATTGetServicesRequest(address=0xA4C138000001),
    "gatt_read": pb.BluetoothGATTReadRequest(address=0xA4C138000001, handle=11),
    "gatt_write": pb.BluetoothGATTWriteRequest(address=0xA4C138000001, handle=21, response=True, data=b"hi"),
    "gatt_write_descriptor": pb.BluetoothGATTWriteDescriptorRequest(address=0xA4C138000001, handle=13,
                                                                     data=b"\x01\x00"),
    "gatt_notify": pb.BluetoothGATTNotifyRequest(address=0xA4C138000001, handle=11, enable=True),
}

print(json.dumps({
    "source": "Tests/Fixtures/esphome/make_message_vectors.py with aioesphomeapi==46.23.0 (protobuf==7.36.2)",
    "server": {name: message.SerializeToString().hex() for name, message in server.items()},
    "client": {name: message.SerializeToString().hex() for name, message in client.items()},
}, indent=2))
