#!/usr/bin/env python3
"""bleak (unchanged, from PyPI) as the central on hci0 against `gattway run` in the peripheral
role on hci1, on the simulator's linked adapters, with a real mosquitto.

Run by Tests/Conformance/run.sh inside Tests/Scripts/with-simulator.sh (scenario
linked-scenario.json), so DBUS_SYSTEM_BUS_ADDRESS points at the private bus. Usage:
bleak_peripheral.py GATTWAY. Prints PASS/FAIL per step and exits 1 on the first failure; every
process it starts is stopped on exit.
"""
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from bleak import BleakClient, BleakScanner

from steps import Steps

GATTWAY = sys.argv[1]
PHONE = "00:AA:01:00:00:00"
GATEWAY_RADIO = "00:AA:02:00:00:00"
ENVIRONMENTAL = "0000181a-0000-1000-8000-00805f9b34fb"
TEMPERATURE = "00002a6e-0000-1000-8000-00805f9b34fb"
LAMP = "6e400002-b5a3-f393-e0a9-e50e24dcca9e"

steps = Steps("peripheral conformance")
step = steps.step
children = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args, log):
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    children.append(process)
    return process


def wait_for(path, text, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                if text in f.read():
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def wait_for_port(port, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def publish(port, topic, payload):
    subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-q", "1", "-t", topic, "-m", payload],
                   check=True)


def listen(port, topic):
    """A mosquitto_sub that prints the next message on `topic` (read it with next_message)."""
    return subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-q", "1", "-C", "1", "-W", "15",
                             "-t", topic],
                            stdout=subprocess.PIPE, text=True)


async def next_message(subscriber):
    output = await asyncio.to_thread(subscriber.communicate)
    try:
        return json.loads(output[0])
    except ValueError:
        return None


async def main(work):
    port = free_port()
    with open(os.path.join(work, "mosquitto.conf"), "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    broker_log = open(os.path.join(work, "mosquitto.log"), "w")
    start(["mosquitto", "-c", os.path.join(work, "mosquitto.conf")], broker_log)
    wait_for_port(port, 10)
    config = {
        "mqtt": {"server": f"mqtt://127.0.0.1:{port}", "base_topic": "gattway"},
        "homeassistant": {"enabled": False},
        "role": "peripheral",
        "peripheral": {
            "adapter": "hci1",
            "advertising": {"local_name": "gw-bleak", "service_uuids": ["181A"]},
            "services": [
                {"uuid": "181A", "characteristics": [
                    {"uuid": "2A6E", "properties": ["read", "notify"], "from_topic": "home/state",
                     "json_key": "temperature", "encoding": "s16le", "scale": 100, "value": 20}]},
                {"uuid": "6e400001-b5a3-f393-e0a9-e50e24dcca9e", "characteristics": [
                    {"uuid": LAMP, "properties": ["read", "write", "write-without-response"],
                     "to_topic": "phone/lamp", "encoding": "u8", "value": 0}]},
            ],
        },
    }
    config_path = os.path.join(work, "config.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    gateway_log_path = os.path.join(work, "gattway.log")
    gateway_log = open(gateway_log_path, "w")
    start([GATTWAY, "run", "--config", config_path, "--log-level", "debug"], gateway_log)
    step("gattway run (role peripheral) serves and advertises on hci1",
         wait_for(gateway_log_path, "peripheral: advertising", 20), "see gattway.log below")

    device = await BleakScanner.find_device_by_filter(
        lambda d, adv: d.address == GATEWAY_RADIO, timeout=10.0, service_uuids=[ENVIRONMENTAL],
        bluez={"adapter": "hci0"})
    step("bleak on hci0 finds the gateway's advertisement with a 181A filter", device is not None)
    async with BleakClient(device, bluez={"adapter": "hci0"}, timeout=15.0) as client:
        uuids = {c.uuid for s in client.services for c in s.characteristics}
        step("services resolved: 2A6E and the lamp characteristic", {TEMPERATURE, LAMP} <= uuids, f"{sorted(uuids)}")
        value = await client.read_gatt_char(TEMPERATURE)
        step("read 2A6E: the configured 20 °C (0x07D0)", bytes(value) == bytes([0xD0, 0x07]), value.hex())

        notified = asyncio.Queue()
        await client.start_notify(TEMPERATURE, lambda _, data: notified.put_nowait(bytes(data)))
        # bluetoothd answers the CCCD write without waiting for the application's StartNotify:
        # wait until the gateway logs the subscription.
        step("the gateway sees the subscription",
             await asyncio.to_thread(wait_for, gateway_log_path, "subscribed to 2A6E", 10))
        # The gateway subscribes to home/state once it is connected to the broker, which on a slow
        # machine can be after the central subscribed: a message published before that is (as
        # MQTT has it for a non-retained message) not delivered, so publish again until one is.
        await asyncio.to_thread(wait_for, gateway_log_path, "MQTT: connected", 15)
        data = None
        for _ in range(10):
            await asyncio.to_thread(publish, port, "home/state", json.dumps({"temperature": 21.5}))
            try:
                data = await asyncio.wait_for(notified.get(), 1)
                break
            except asyncio.TimeoutError:
                pass
        step("MQTT home/state 21.5 → notification 0x0866", data == bytes([0x66, 0x08]),
             data.hex() if data else "nothing")

        subscriber = listen(port, "phone/lamp")
        await asyncio.sleep(0.3)
        await client.write_gatt_char(LAMP, b"\x01", response=True)
        message = await next_message(subscriber)
        step("write with response → phone/lamp with the phone's address and value 1",
             message is not None and message.get("central") == PHONE and message.get("value") == 1, f"{message}")
        subscriber = listen(port, "phone/lamp")
        await asyncio.sleep(0.3)
        await client.write_gatt_char(LAMP, b"\x00", response=False)
        message = await next_message(subscriber)
        step("write without response → phone/lamp value 0", message is not None and message.get("value") == 0,
             f"{message}")
        value = await client.read_gatt_char(LAMP)
        step("read the lamp characteristic back: the written 0", bytes(value) == b"\x00", value.hex())
        await client.stop_notify(TEMPERATURE)
    step("disconnect", True)


def run():
    code = 0
    with tempfile.TemporaryDirectory(prefix="gattway-bleak-periph.") as work:
        try:
            asyncio.run(main(work))
            steps.summary()
        except SystemExit as exit:
            code = exit.code or 0
        except Exception as error:  # noqa: BLE001 - report any bleak error as a failed step
            try:
                steps.unexpected(error)
            except SystemExit:
                code = 1
        finally:
            for process in reversed(children):
                process.terminate()
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    process.kill()
            if code != 0:
                log = os.path.join(work, "gattway.log")
                if os.path.exists(log):
                    print("--- gattway.log (last 40 lines)")
                    with open(log) as f:
                        print("".join(f.readlines()[-40:]))
    sys.exit(code)


run()
