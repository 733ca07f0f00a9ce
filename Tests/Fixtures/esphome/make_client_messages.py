#!/usr/bin/env python3
"""Writes client-messages.json: every message of the ESPHome native API that a client may send
(api.proto's `option (source)` SOURCE_CLIENT or SOURCE_BOTH), read from the protobuf classes
aioesphomeapi ships (api_pb2 and api_options_pb2, pinned in Tests/ESPHome/requirements.txt), each
with its type id and a payload encoded by Google's protobuf. ESPHomeAPITests' RequestCoverageTests
sends each to gattway's API server and checks the answer (or ESPHome's silence), so a message type
added to the API shows up in that test when this file is made again with a newer aioesphomeapi.

Run:
  .venv-esphome/bin/python Tests/Fixtures/esphome/make_client_messages.py > Tests/Fixtures/esphome/client-messages.json
"""
import importlib.metadata
import json

from aioesphomeapi import api_options_pb2 as options
from aioesphomeapi import api_pb2 as pb

DEVICE = 0xA4C1380000AA  # connected through the proxy by the test's backend

# Fields for the messages whose empty form would not exercise the request (a device, a handle).
FIELDS = {
    "HelloRequest": dict(client_info="Home Assistant 2025.4.4", api_version_major=1, api_version_minor=10),
    # Connect V3 with cache, a public address.
    "BluetoothDeviceRequest": dict(address=DEVICE, request_type=4, has_address_type=True),
    "BluetoothGATTGetServicesRequest": dict(address=DEVICE),
    "BluetoothGATTReadRequest": dict(address=DEVICE, handle=0x0B),
    "BluetoothGATTWriteRequest": dict(address=DEVICE, handle=0x0B, response=True, data=b"\x01"),
    "BluetoothGATTReadDescriptorRequest": dict(address=DEVICE, handle=0x0D),
    "BluetoothGATTWriteDescriptorRequest": dict(address=DEVICE, handle=0x0D, data=b"\x01\x00"),
    "BluetoothGATTNotifyRequest": dict(address=DEVICE, handle=0x0B, enable=True),
    "BluetoothSetConnectionParamsRequest": dict(address=DEVICE, min_interval=6, max_interval=12, latency=0,
                                                timeout=500),
    "NoiseEncryptionSetKeyRequest": dict(key=bytes(range(32))),
    "SubscribeBluetoothLEAdvertisementsRequest": dict(flags=1),
    "BluetoothScannerSetModeRequest": dict(mode=0),
    "GetTimeResponse": dict(epoch_seconds=1_800_000_000),
}

messages = []
for name, descriptor in pb.DESCRIPTOR.message_types_by_name.items():
    message_options = descriptor.GetOptions()
    if not message_options.HasExtension(options.id):
        continue
    source = message_options.Extensions[options.source]
    if source == options.SOURCE_SERVER:
        continue
    message = getattr(pb, name)(**FIELDS.get(name, {}))
    messages.append({
        "id": message_options.Extensions[options.id],
        "name": name,
        "source": "both" if source == options.SOURCE_BOTH else "client",
        "payload": message.SerializeToString().hex(),
    })

version = importlib.metadata.version("aioesphomeapi")
print(json.dumps({
    "source": f"Tests/Fixtures/esphome/make_client_messages.py with aioesphomeapi=={version}",
    "device": DEVICE,
    "messages": sorted(messages, key=lambda m: m["id"]),
}, indent=1))
