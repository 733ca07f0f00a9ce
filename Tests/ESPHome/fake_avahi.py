#!/usr/bin/env python3
"""A stand-in for avahi-daemon's D-Bus API on a private bus, for esphome_proxy.py: owns
org.freedesktop.Avahi, answers Server.GetVersionString and EntryGroupNew, and records every EntryGroup call
(AddService, Commit, Free) as a JSON line in the file named by argv[2]. A real avahi-daemon would
multicast on the machine's network interfaces, which a test must not do.

Usage: fake_avahi.py BUS_ADDRESS RECORD_FILE
"""
import asyncio
import json
import sys

from dbus_fast.aio import MessageBus
from dbus_fast.service import ServiceInterface, method

ADDRESS, RECORD = sys.argv[1], sys.argv[2]


def record(call, **fields):
    with open(RECORD, "a") as f:
        f.write(json.dumps({"call": call, **fields}) + "\n")


class EntryGroup(ServiceInterface):
    def __init__(self, path):
        super().__init__("org.freedesktop.Avahi.EntryGroup")
        self.path = path

    @method()
    def AddService(self, interface: "i", protocol: "i", flags: "u", name: "s", type: "s", domain: "s",  # noqa: A002
                   host: "s", port: "q", txt: "aay") -> None:
        record("AddService", path=self.path, interface=interface, protocol=protocol, name=name, type=type,
               domain=domain, host=host, port=port, txt=[bytes(t).decode() for t in txt])

    @method()
    def Commit(self) -> None:
        record("Commit", path=self.path)

    @method()
    def Free(self) -> None:
        record("Free", path=self.path)


class Server(ServiceInterface):
    def __init__(self, bus):
        super().__init__("org.freedesktop.Avahi.Server")
        self.bus = bus
        self.groups = 0

    @method()
    def GetVersionString(self) -> "s":
        return "avahi 0.8 (stand-in)"

    @method()
    def EntryGroupNew(self) -> "o":
        self.groups += 1
        path = f"/Client1/EntryGroup{self.groups}"
        self.bus.export(path, EntryGroup(path))
        return path


async def main():
    bus = await MessageBus(bus_address=ADDRESS).connect()
    bus.export("/", Server(bus))
    await bus.request_name("org.freedesktop.Avahi")
    record("ready")
    await asyncio.Event().wait()


asyncio.run(main())
