#!/usr/bin/python3
"""The peripherals' side of the pairing checks of the real-BlueZ lane (guest-pairing.sh).

Registers an org.bluez.Agent1 with bluetoothd and makes it the default agent
(RequestDefaultAgent), so bluetoothd asks it about the pairings the peripheral controllers
(hci2, hci3) take part in as responders: it prints "passkey N" for DisplayPasskey (the passkey
the central's user must type) and "confirm N" for RequestConfirmation (accepted: the number a
numeric comparison shows), and accepts every authorization. Prints "READY" once registered.
Runs with Debian's python3-dbus/-gi in the VM; the capability is the first argument.
"""
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

PATH = '/rbz/agent'


def say(*words):
    print(*words, flush=True)


class Agent(dbus.service.Object):
    @dbus.service.method('org.bluez.Agent1', in_signature='', out_signature='')
    def Release(self):
        say('release')

    @dbus.service.method('org.bluez.Agent1', in_signature='ouq', out_signature='')
    def DisplayPasskey(self, device, passkey, entered):
        say('passkey %06d %s %d' % (passkey, device, entered))

    @dbus.service.method('org.bluez.Agent1', in_signature='ou', out_signature='')
    def RequestConfirmation(self, device, passkey):
        say('confirm %06d %s' % (passkey, device))

    @dbus.service.method('org.bluez.Agent1', in_signature='o', out_signature='')
    def RequestAuthorization(self, device):
        say('authorize %s' % device)

    @dbus.service.method('org.bluez.Agent1', in_signature='os', out_signature='')
    def AuthorizeService(self, device, uuid):
        say('service %s %s' % (device, uuid))

    @dbus.service.method('org.bluez.Agent1', in_signature='o', out_signature='u')
    def RequestPasskey(self, device):
        say('asked-passkey %s' % device)
        raise dbus.exceptions.DBusException('not this side', name='org.bluez.Error.Rejected')

    @dbus.service.method('org.bluez.Agent1', in_signature='', out_signature='')
    def Cancel(self):
        say('cancel')


def main():
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    Agent(bus, PATH)
    manager = dbus.Interface(bus.get_object('org.bluez', '/org/bluez'), 'org.bluez.AgentManager1')
    manager.RegisterAgent(PATH, sys.argv[1] if len(sys.argv) > 1 else 'DisplayYesNo')
    manager.RequestDefaultAgent(PATH)
    say('READY')
    GLib.MainLoop().run()


if __name__ == '__main__':
    main()
