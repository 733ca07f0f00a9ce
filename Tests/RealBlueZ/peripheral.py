#!/usr/bin/python3
"""The test peripheral of the real-BlueZ lane (runs in the VM with Debian's python3-dbus/-gi).

On --adapter (hci1) it registers, through org.bluez.GattManager1 and LEAdvertisingManager1:
  0x180F battery           2A19 read+notify (u8, counts down 100, 99, ... every --period, or on SIGUSR2)
  0x181A environmental     2A6E read+notify (s16le 0.01 degC, 21.50), 2A6F read+notify (u16le 0.01 %, 45.00)
  0xFF00 lamp              FF01 write+write-without-response (the command), FF02 read+notify (the state:
                           the last value written to FF01), FF03 read failing with org.bluez.Error.Failed,
                           FF04 write failing with org.bluez.Error.InvalidValueLength, FF05 read "hello world",
                           with --long-value FF06 read+notify (60 bytes, the first counting up every --period)
and advertises 180F with its name, manufacturer data {0xFFFF: "RBZ1"} and service data {180F: 0x64}.
On --other (hci2) it advertises an unrelated device (180D only, "RBZ-HR") that a 180F scan must
not report. The adapter aliases are set to the names, so the GAP Device Name a central reads after
connecting equals the advertised name.

It re-registers everything whenever org.bluez gets a new owner (a bluetoothd restart). Prints
"READY n" after the n-th complete registration and one line per write and (un)subscription.
"""
import argparse
import signal
import sys
import time

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

PROPS = 'org.freedesktop.DBus.Properties'
CHR = 'org.bluez.GattCharacteristic1'


def say(*words):
    print('[peripheral %.3f]' % time.monotonic(), *words, flush=True)


class Error(dbus.exceptions.DBusException):
    def __init__(self, name, message):
        super().__init__(message, name=name)


class App(dbus.service.Object):
    """The GATT application root: an ObjectManager over services and characteristics."""

    def __init__(self, bus, path):
        super().__init__(bus, path)
        self.path = path
        self.services = []

    @dbus.service.method('org.freedesktop.DBus.ObjectManager', out_signature='a{oa{sa{sv}}}')
    def GetManagedObjects(self):
        objects = {}
        for service in self.services:
            objects[dbus.ObjectPath(service.path)] = {'org.bluez.GattService1': service.properties()}
            for char in service.chars:
                objects[dbus.ObjectPath(char.path)] = {CHR: char.properties()}
        return objects


class Service(dbus.service.Object):
    def __init__(self, app, uuid):
        self.path = '%s/s%d' % (app.path, len(app.services))
        super().__init__(app.connection, self.path)
        self.uuid = uuid
        self.chars = []
        app.services.append(self)

    def properties(self):
        return {'UUID': self.uuid, 'Primary': dbus.Boolean(True),
                'Characteristics': dbus.Array([dbus.ObjectPath(c.path) for c in self.chars], 'o')}

    @dbus.service.method(PROPS, in_signature='s', out_signature='a{sv}')
    def GetAll(self, interface):
        return self.properties()


class Char(dbus.service.Object):
    def __init__(self, service, uuid, flags, value=b'', read_error=None, write_error=None):
        self.path = '%s/c%d' % (service.path, len(service.chars))
        super().__init__(service.connection, self.path)
        self.service, self.uuid, self.flags = service, uuid, flags
        self.value = bytes(value)
        self.read_error, self.write_error = read_error, write_error
        self.notifying = False
        self.on_write = None
        service.chars.append(self)

    def properties(self):
        return {'Service': dbus.ObjectPath(self.service.path), 'UUID': self.uuid,
                'Flags': dbus.Array(self.flags, 's')}

    @dbus.service.method(PROPS, in_signature='s', out_signature='a{sv}')
    def GetAll(self, interface):
        return self.properties()

    @dbus.service.signal(PROPS, signature='sa{sv}as')
    def PropertiesChanged(self, interface, changed, invalidated):
        pass

    def update(self, value):
        self.value = bytes(value)
        if self.notifying:
            self.PropertiesChanged(CHR, {'Value': dbus.Array(self.value, 'y')}, [])

    @dbus.service.method(CHR, in_signature='a{sv}', out_signature='ay')
    def ReadValue(self, options):
        if self.read_error:
            raise Error(*self.read_error)
        offset = int(options.get('offset', 0))
        return dbus.Array(self.value[offset:], 'y')

    @dbus.service.method(CHR, in_signature='aya{sv}')
    def WriteValue(self, value, options):
        say('write', self.uuid, bytes(value).hex(), 'options=' + ','.join(sorted(str(k) for k in options)))
        if self.write_error:
            raise Error(*self.write_error)
        if self.on_write:
            self.on_write(bytes(value))
        else:
            self.value = bytes(value)

    @dbus.service.method(CHR)
    def StartNotify(self):
        say('subscribed', self.uuid)
        self.notifying = True

    @dbus.service.method(CHR)
    def StopNotify(self):
        say('unsubscribed', self.uuid)
        self.notifying = False


class Advert(dbus.service.Object):
    def __init__(self, bus, path, name, uuids, manufacturer=None, service_data=None):
        super().__init__(bus, path)
        self.path = path
        self.props = {'Type': 'peripheral', 'LocalName': name, 'ServiceUUIDs': dbus.Array(uuids, 's'),
                      'Discoverable': dbus.Boolean(True)}
        if manufacturer:
            self.props['ManufacturerData'] = dbus.Dictionary(
                {dbus.UInt16(k): dbus.Array(v, 'y') for k, v in manufacturer.items()}, 'qv')
        if service_data:
            self.props['ServiceData'] = dbus.Dictionary(
                {k: dbus.Array(v, 'y') for k, v in service_data.items()}, 'sv')

    @dbus.service.method(PROPS, in_signature='s', out_signature='a{sv}')
    def GetAll(self, interface):
        return self.props

    @dbus.service.method('org.bluez.LEAdvertisement1')
    def Release(self):
        say('advertisement released', self.path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--adapter', default='hci1')
    parser.add_argument('--name', default='RBZ-Bat')
    parser.add_argument('--other', default='hci2', help='adapter of the unrelated advertiser ("" for none)')
    parser.add_argument('--period', type=float, default=0.2,
                        help='notification period in seconds (0: the values change only on SIGUSR2)')
    parser.add_argument('--long-value', action='store_true',
                        help='add FF06 read+notify to the lamp service: a 60-byte value whose first '
                             'byte counts up every tick (longer than a notification on an MTU 48 link)')
    args = parser.parse_args()

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()

    app = App(bus, '/rbz/app')
    battery = Service(app, '180f')
    level = Char(battery, '2a19', ['read', 'notify'], [100])
    ess = Service(app, '181a')
    temperature = Char(ess, '2a6e', ['read', 'notify'], (2150).to_bytes(2, 'little'))
    humidity = Char(ess, '2a6f', ['read', 'notify'], (4500).to_bytes(2, 'little'))
    lamp = Service(app, 'ff00')
    command = Char(lamp, 'ff01', ['write', 'write-without-response'])
    state = Char(lamp, 'ff02', ['read', 'notify'], b'\x00')
    Char(lamp, 'ff03', ['read'], read_error=('org.bluez.Error.Failed', 'test failure'))
    Char(lamp, 'ff04', ['write'], write_error=('org.bluez.Error.InvalidValueLength', 'bad length'))
    Char(lamp, 'ff05', ['read'], b'hello world')
    command.on_write = state.update
    long_value = Char(lamp, 'ff06', ['read', 'notify'], bytes(range(60))) if args.long_value else None

    adverts = [(args.adapter, args.name,
                Advert(bus, '/rbz/adv0', args.name, ['180F'], {0xFFFF: b'RBZ1'}, {'180F': b'\x64'}))]
    if args.other:
        adverts.append((args.other, 'RBZ-HR', Advert(bus, '/rbz/adv1', 'RBZ-HR', ['180D'])))

    def tick():
        level.update([level.value[0] - 1 if level.value[0] > 1 else 100])
        temperature.update((int.from_bytes(temperature.value, 'little') + 1).to_bytes(2, 'little'))
        humidity.update((int.from_bytes(humidity.value, 'little') + 1).to_bytes(2, 'little'))
        if long_value:
            long_value.update(bytes([(long_value.value[0] + 1) % 256]) + long_value.value[1:])
        return True
    if args.period > 0:
        GLib.timeout_add(int(args.period * 1000), tick)

    # SIGUSR2: one step of the values (a test that compares what a central read with what it
    # published wants them still in between).
    def stepped():
        tick()
        say('stepped: battery level', level.value[0])
        return True
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR2, stepped)

    registrations = {'pending': 0, 'rounds': 0}

    def done(what):
        def callback(*_):
            say('registered', what)
            registrations['pending'] -= 1
            if registrations['pending'] == 0:
                registrations['rounds'] += 1
                say('READY', registrations['rounds'])
        return callback

    def failed(what):
        def callback(error):
            say('FAILED to register', what, error)
            sys.exit(2)
        return callback

    def register(attempt=0):
        # After a restart the adapters may still be powering on (Set Powered answers Busy): wait.
        try:
            for adapter, name, _advert in adverts:
                props = dbus.Interface(bus.get_object('org.bluez', '/org/bluez/' + adapter), PROPS)
                if not props.Get('org.bluez.Adapter1', 'Powered'):
                    props.Set('org.bluez.Adapter1', 'Powered', dbus.Boolean(True))
                props.Set('org.bluez.Adapter1', 'Alias', name)
        except dbus.exceptions.DBusException as error:
            if attempt > 50:
                raise
            say('adapters not ready (%s), retrying' % error.get_dbus_name())
            GLib.timeout_add(200, lambda: register(attempt + 1) and False)
            return
        registrations['pending'] = 1 + len(adverts)
        for adapter, _name, advert in adverts:
            path = '/org/bluez/' + adapter
            dbus.Interface(bus.get_object('org.bluez', path), 'org.bluez.LEAdvertisingManager1').RegisterAdvertisement(
                advert.path, {}, reply_handler=done('advertisement on ' + adapter), error_handler=failed(advert.path))
        dbus.Interface(bus.get_object('org.bluez', '/org/bluez/' + args.adapter),
                       'org.bluez.GattManager1').RegisterApplication(
            app.path, {}, reply_handler=done('application'), error_handler=failed('application'))

    def owner_changed(name, old, new):
        if name == 'org.bluez' and new:
            say('org.bluez is back (%s): registering again' % new)
            for char in (level, temperature, humidity, state):
                char.notifying = False
            GLib.timeout_add(300, lambda: register() and False)
    bus.add_signal_receiver(owner_changed, 'NameOwnerChanged', 'org.freedesktop.DBus', 'org.freedesktop.DBus')

    # After a central disconnects, the kernel (6.1, btvirt) does not always resume this
    # advertising instance; a peripheral that wants to stay connectable registers it again.
    pending_readvertise = {'timer': None}

    def readvertise(which=(0,)):
        pending_readvertise['timer'] = None
        for index in which:
            adapter, name, advert = adverts[index]
            manager = dbus.Interface(bus.get_object('org.bluez', '/org/bluez/' + adapter),
                                     'org.bluez.LEAdvertisingManager1')

            def again(*_, manager=manager, advert=advert, adapter=adapter):
                manager.RegisterAdvertisement(advert.path, {},
                                              reply_handler=lambda: say('advertising again on', adapter),
                                              error_handler=lambda e: say('re-advertising failed:', e))
            manager.UnregisterAdvertisement(advert.path, reply_handler=again, error_handler=again)
        return False

    # SIGUSR1: advertise anew on every adapter. btvirt's controllers send an advertising report
    # only when scanning or advertising starts, so a test waiting for one (a real radio repeats
    # it every few hundred milliseconds) asks for the next this way.
    def nudged():
        say('nudged: advertising anew')
        if registrations['pending'] == 0:
            readvertise(range(len(adverts)))
        return True
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR1, nudged)

    def link_changed(interface, changed, invalidated, path=None):
        if interface == 'org.bluez.Device1' and str(path).startswith('/org/bluez/%s/dev_' % args.adapter) \
                and changed.get('Connected') is not None and not changed['Connected']:
            say('central disconnected')
            if pending_readvertise['timer'] is None and registrations['pending'] == 0:
                pending_readvertise['timer'] = GLib.timeout_add(200, readvertise)
    bus.add_signal_receiver(link_changed, 'PropertiesChanged', PROPS, 'org.bluez', path_keyword='path')

    register()
    GLib.MainLoop().run()


if __name__ == '__main__':
    main()
