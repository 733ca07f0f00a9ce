#!/usr/bin/env python3
"""A stand-in for avahi-daemon's D-Bus API on a private bus, for esphome_proxy.py. A real
avahi-daemon would multicast on the machine's network interfaces, which a test must not do.

It owns org.freedesktop.Avahi and answers what gattway asks, as avahi-daemon 0.8 does:
  Server: GetVersionString, GetState, EntryGroupNew, GetAlternativeServiceName ("name" ->
    "name #2", "name #2" -> "name #3"), ResolveService (a service one of its groups has
    established, or one "another device" announces; else TimeoutError);
  EntryGroup: AddService (a name another group of this daemon holds is refused with
    org.freedesktop.Avahi.CollisionError, "Local name collision"), Commit (state REGISTERING at
    once; 50 ms later COLLISION when another device on the network announces the name, else
    ESTABLISHED), Reset, Free, GetState; the StateChanged(i state, s error) signal. (avahi-daemon
    sends StateChanged to the group's client only; this one broadcasts it.)
Every EntryGroup call and every state is recorded as a JSON line in RECORD_FILE.

The network is played by names "another device" announces: --taken NAME (that name),
--taken-all NAME (that name and every alternative of it), and at run time through
io.gattway.FakeAvahi1 at /io/gattway/FakeAvahi: Take(s name, b with_alternatives), and Fail(),
which puts every established group in state FAILURE (as when the network goes away).

Usage: fake_avahi.py BUS_ADDRESS RECORD_FILE [--taken NAME]... [--taken-all NAME]...
"""
import argparse
import asyncio
import json
import re

from dbus_fast.aio import MessageBus
from dbus_fast.errors import DBusError
from dbus_fast.service import ServiceInterface

try:  # dbus-fast 2.x (what Home Assistant 2025.4 pins) names the decorators method and signal.
    from dbus_fast.service import dbus_method, dbus_signal
except ImportError:
    from dbus_fast.service import method as dbus_method, signal as dbus_signal

parser = argparse.ArgumentParser()
parser.add_argument("address")
parser.add_argument("record")
parser.add_argument("--taken", action="append", default=[])
parser.add_argument("--taken-all", action="append", default=[])
ARGS = parser.parse_args()

UNCOMMITTED, REGISTERING, ESTABLISHED, COLLISION, FAILURE = range(5)
OTHER_DEVICE = {"host": "other-proxy.local", "address": "192.0.2.7", "port": 6053,
                "txt": ["mac=0242c0000207", "friendly_name=other proxy", "platform=ESP32"]}


def record(call, **fields):
    with open(ARGS.record, "a") as f:
        f.write(json.dumps({"call": call, **fields}) + "\n")


def alternative(name):
    match = re.fullmatch(r"(.*) #(\d+)", name)
    return f"{match.group(1)} #{int(match.group(2)) + 1}" if match else f"{name} #2"


class Network:
    """The names other devices announce."""

    def __init__(self):
        self.taken = set(ARGS.taken)
        self.taken_all = set(ARGS.taken_all)

    def announces(self, name):
        base = re.fullmatch(r"(.*) #\d+", name)
        return name in self.taken or name in self.taken_all or (base and base.group(1) in self.taken_all)


NETWORK = Network()
GROUPS = {}  # path -> EntryGroup, while not freed


class EntryGroup(ServiceInterface):
    def __init__(self, path):
        super().__init__("org.freedesktop.Avahi.EntryGroup")
        self.path = path
        self.state = UNCOMMITTED
        self.services = []  # dicts of AddService's arguments

    def set_state(self, state, error=""):
        self.state = state
        record("state", path=self.path, state=state, names=[s["name"] for s in self.services])
        self.StateChanged(state, error)

    @dbus_signal()
    def StateChanged(self, state, error) -> "is":
        return [state, error]

    @dbus_method()
    def AddService(self, interface: "i", protocol: "i", flags: "u", name: "s", type: "s", domain: "s",  # noqa: A002
                   host: "s", port: "q", txt: "aay") -> None:
        texts = [bytes(t).decode() for t in txt]
        record("AddService", path=self.path, interface=interface, protocol=protocol, name=name, type=type,
               domain=domain, host=host, port=port, txt=texts)
        for other in GROUPS.values():
            if other is not self and any(s["name"] == name and s["type"] == type for s in other.services):
                raise DBusError("org.freedesktop.Avahi.CollisionError", "Local name collision")
        self.services.append({"name": name, "type": type, "port": port, "txt": texts})

    @dbus_method()
    def Commit(self) -> None:
        record("Commit", path=self.path)
        self.set_state(REGISTERING)
        collides = any(NETWORK.announces(s["name"]) for s in self.services)
        asyncio.get_running_loop().call_later(0.05, self.probed, collides)

    def probed(self, collides):
        if self.path not in GROUPS or self.state != REGISTERING:
            return
        if collides:
            # Avahi withdraws the group's entries on a collision; the client adds them again.
            self.set_state(COLLISION)
            self.services = []
        else:
            self.set_state(ESTABLISHED)

    @dbus_method()
    def Reset(self) -> None:
        record("Reset", path=self.path)
        self.services = []
        self.set_state(UNCOMMITTED)

    @dbus_method()
    def GetState(self) -> "i":
        return self.state

    @dbus_method()
    def Free(self) -> None:
        record("Free", path=self.path)
        GROUPS.pop(self.path, None)
        self.services = []
        BUS.unexport(self.path)


class Server(ServiceInterface):
    def __init__(self):
        super().__init__("org.freedesktop.Avahi.Server")
        self.groups = 0

    @dbus_method()
    def GetVersionString(self) -> "s":
        return "avahi 0.8 (stand-in)"

    @dbus_method()
    def GetState(self) -> "i":
        return 2  # AVAHI_SERVER_RUNNING

    @dbus_method()
    def EntryGroupNew(self) -> "o":
        self.groups += 1
        path = f"/Client1/EntryGroup{self.groups}"
        GROUPS[path] = EntryGroup(path)
        BUS.export(path, GROUPS[path])
        return path

    @dbus_method()
    def GetAlternativeServiceName(self, name: "s") -> "s":
        return alternative(name)

    @dbus_method()
    def ResolveService(self, interface: "i", protocol: "i", name: "s", type: "s", domain: "s",  # noqa: A002
                       aprotocol: "i", flags: "u") -> "iissssisqaayu":
        for group in GROUPS.values():
            for service in group.services:
                if group.state == ESTABLISHED and service["name"] == name and service["type"] == type:
                    # AVAHI_LOOKUP_RESULT_LOCAL | AVAHI_LOOKUP_RESULT_OUR_OWN
                    return [2, 0, name, type, "local", "gattway-test.local", 0, "127.0.0.1", service["port"],
                            [t.encode() for t in service["txt"]], 8 | 16]
        if NETWORK.announces(name):
            return [2, 0, name, type, "local", OTHER_DEVICE["host"], 0, OTHER_DEVICE["address"],
                    OTHER_DEVICE["port"], [t.encode() for t in OTHER_DEVICE["txt"]], 0]
        raise DBusError("org.freedesktop.Avahi.TimeoutError", "Timeout reached")


class Control(ServiceInterface):
    def __init__(self):
        super().__init__("io.gattway.FakeAvahi1")

    @dbus_method()
    def Take(self, name: "s", with_alternatives: "b") -> None:
        (NETWORK.taken_all if with_alternatives else NETWORK.taken).add(name)
        record("Take", name=name, with_alternatives=with_alternatives)

    @dbus_method()
    def Fail(self) -> None:
        record("Fail")
        for group in list(GROUPS.values()):
            if group.state == ESTABLISHED:
                group.set_state(FAILURE, "Network is down")


async def main():
    global BUS
    BUS = await MessageBus(bus_address=ARGS.address).connect()
    BUS.export("/", Server())
    BUS.export("/io/gattway/FakeAvahi", Control())
    await BUS.request_name("org.freedesktop.Avahi")
    record("ready")
    await asyncio.Event().wait()


asyncio.run(main())
