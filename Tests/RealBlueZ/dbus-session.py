#!/usr/bin/python3
"""The differential check's scripted client session: the same D-Bus conversation with org.bluez,
run in the VM against the real bluetoothd and on the host against `gattway simulate`
(Tests/RealBlueZ/simulator-scenario.json). It records what a client sees, in arrival order:
method replies and errors, InterfacesAdded/Removed and PropertiesChanged with their property
sets, normalised so the two recordings can be compared (compare-sessions.py):
  - the peripheral's address becomes DEV, GATT object paths become service/characteristic/
    descriptor UUIDs (dev/180f/2a19/2902) instead of handles;
  - only hci0 and the peripheral are recorded (the VM's other controllers are not);
  - notification and read values are kept for reads, replaced by "*" for notifications;
    RSSI values become "*"; consecutive identical events collapse into one.
One JSON object per line: {"step": name, "event": kind, ...}.
"""
import argparse
import json
import os
import select
import time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

PERIPHERAL = '00:AA:01:01:00:01'
DEV_PATH = '/org/bluez/hci0/dev_' + PERIPHERAL.replace(':', '_')
PROPS = 'org.freedesktop.DBus.Properties'
DEV = 'org.bluez.Device1'
CHR = 'org.bluez.GattCharacteristic1'
BASE = '-0000-1000-8000-00805f9b34fb'
# Property values that differ by nature (controller, timing) are recorded as present only.
SENSORS = {'2a19', '2a6e', '2a6f'}
OPAQUE = {'RSSI', 'TxPower', 'Modalias', 'Class', 'Appearance', 'Icon'}


def short(uuid):
    uuid = str(uuid).lower()
    return uuid[4:8] if uuid.startswith('0000') and uuid.endswith(BASE) else uuid


class Recorder:
    def __init__(self, bus, out):
        self.bus = bus
        self.out = out
        self.step = 'start'
        self.names = {}  # object path -> normalised name
        self.last = None
        self.count = 0
        self.rssi_steps = set()

    def name(self, path):
        path = str(path)
        if path in self.names:
            return self.names[path]
        if path == DEV_PATH:
            return 'DEV'
        if path.startswith(DEV_PATH + '/'):
            return 'DEV/?' + path[len(DEV_PATH):]  # not announced (should not happen)
        return path

    def learn(self, path, interfaces):
        path = str(path)
        for iface, key, parent_key in (('org.bluez.GattService1', 'UUID', 'Device'),
                                       ('org.bluez.GattCharacteristic1', 'UUID', 'Service'),
                                       ('org.bluez.GattDescriptor1', 'UUID', 'Characteristic')):
            if iface in interfaces:
                props = interfaces[iface]
                parent = self.name(props.get(parent_key, path.rsplit('/', 1)[0]))
                self.names[path] = '%s/%s' % (parent, short(props[key]))

    def value(self, key, value, context=''):
        if key in OPAQUE:
            return '*'
        if key == 'Value':
            return '*' if context in ('notify', 'sensor') else bytes(value).hex()
        if isinstance(value, dbus.ObjectPath):
            return self.name(value)
        if isinstance(value, dbus.Array):
            if value.signature == 'y':
                return bytes(value).hex()
            items = [self.value('', v) for v in value]
            if key in ('UUIDs', 'Flags', 'Includes', 'Characteristics'):
                return sorted(short(v) if isinstance(v, str) else v for v in items)
            return items
        if isinstance(value, dbus.Dictionary):
            return {str(short(k) if isinstance(k, str) else int(k)): self.value('', v)
                    for k, v in sorted(value.items())}
        if isinstance(value, dbus.Boolean):
            return bool(value)
        if isinstance(value, (dbus.String, dbus.Signature)):
            text = str(value)
            return short(text) if text.endswith(BASE) else text
        if isinstance(value, (int, float)):
            return int(value) if not isinstance(value, float) else value
        return str(value)

    def props(self, props, context=''):
        return {str(k): self.value(str(k), v, context) for k, v in sorted(props.items())}

    def emit(self, event, **fields):
        if self.step == 'cleanup':
            return
        record = {'step': self.step, 'event': event}
        record.update(fields)
        line = json.dumps(record, sort_keys=True)
        if line == self.last:
            return
        self.last = line
        self.count += 1
        self.out.write(line + '\n')
        self.out.flush()

    def relevant(self, path):
        path = str(path)
        return path == '/org/bluez/hci0' or path == DEV_PATH or path.startswith(DEV_PATH + '/')

    def on_added(self, path, interfaces):
        if not self.relevant(path):
            return
        self.learn(path, interfaces)
        ifaces = {str(i): self.props(p) for i, p in sorted(interfaces.items())
                  if not str(i).startswith('org.freedesktop.DBus.')}
        self.emit('InterfacesAdded', path=self.name(path), interfaces=ifaces)

    def on_removed(self, path, interfaces):
        if self.relevant(path):
            self.emit('InterfacesRemoved', path=self.name(path),
                      interfaces=sorted(str(i) for i in interfaces if not str(i).startswith('org.freedesktop.DBus.')))

    def on_changed(self, interface, changed, invalidated, path=None):
        if not self.relevant(path):
            return
        context = ''
        if interface == CHR and 'Value' in changed:
            if self.step.startswith('notify'):
                context = 'notify'
            elif self.name(path).split('/')[-1] in SENSORS:
                context = 'sensor'  # a changing reading: its bytes differ between runs
        if interface == DEV and 'Modalias' in changed:
            # Set by bluetoothd's deviceinfo plugin from the peer's PnP ID, coalesced with whatever
            # else changes in that main-loop turn: recorded as an event of its own.
            self.emit('Modalias', path=self.name(path))
            changed = {k: v for k, v in changed.items() if k != 'Modalias'}
            if not changed and not invalidated:
                return
        if interface == DEV and set(changed) == {'RSSI'} and not invalidated:
            # RSSI reports come at the radio's pace: recorded once per step.
            if self.step in self.rssi_steps:
                return
            self.rssi_steps.add(self.step)
        self.emit('PropertiesChanged', path=self.name(path), interface=str(interface),
                  changed=self.props(changed, context), invalidated=sorted(str(i) for i in invalidated))


class Retry(Exception):
    """The emulated link failed to come up (bluetoothd then removes the temporary device at once):
    the session starts again from scratch instead of recording a radio hiccup as a difference."""


ATTEMPTS = 3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--out', required=True)
    args = parser.parse_args()
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    current = {}
    bus.add_signal_receiver(lambda *a: current['rec'].on_added(*a), 'InterfacesAdded',
                            'org.freedesktop.DBus.ObjectManager', 'org.bluez')
    bus.add_signal_receiver(lambda *a: current['rec'].on_removed(*a), 'InterfacesRemoved',
                            'org.freedesktop.DBus.ObjectManager', 'org.bluez')
    bus.add_signal_receiver(lambda *a, **k: current['rec'].on_changed(*a, **k), 'PropertiesChanged', PROPS,
                            'org.bluez', path_keyword='path')
    for attempt in range(1, ATTEMPTS + 1):
        with open(args.out, 'w') as out:
            current['rec'] = Recorder(bus, out)
            try:
                count = session(bus, current['rec'], last=attempt == ATTEMPTS)
            except Retry as reason:
                print('attempt %d: %s; starting the session again' % (attempt, reason), flush=True)
                continue
        print('recorded %d events (attempt %d)' % (count, attempt))
        return
    raise SystemExit('no attempt completed')


def session(bus, rec, last):
    context = GLib.MainContext.default()

    def pump(seconds, until=None):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if until and until():
                return True
            if not context.iteration(False):
                time.sleep(0.002)
        return bool(until and until())

    def call(step, path, interface, method, *args_, settle=0.4, timeout=30, signature=None, result=None):
        """An asynchronous call; records the reply or error, then the signals until `settle` s after it."""
        rec.step = step
        rec.emit('call', method='%s.%s' % (interface.split('.')[-1], method), path=rec.name(path))
        done = {}

        def reply(*values):
            done['reply'] = values
            shown = result(values) if result else [rec.value('', v) for v in values]
            rec.emit('reply', values=shown)

        def error(e):
            done['error'] = e
            rec.emit('error', name=e.get_dbus_name(), message=e.get_dbus_message())
        obj = bus.get_object('org.bluez', path, introspect=False)
        getattr(dbus.Interface(obj, interface), method)(*args_, reply_handler=reply, error_handler=error,
                                                          timeout=timeout, signature=signature)
        if not pump(timeout + 1, lambda: done):
            rec.emit('timeout')
        pump(settle)
        return done

    def wait(step, what, predicate, seconds):
        rec.step = step
        if not pump(seconds, predicate):
            rec.emit('timeout', waiting_for=what)
            return False
        return True

    def char_path(uuid):
        for path, name in rec.names.items():
            if name.endswith('/' + uuid) and name.count('/') == 2:
                return path
        raise SystemExit('characteristic %s not announced' % uuid)

    objects = dbus.Interface(bus.get_object('org.bluez', '/'), 'org.freedesktop.DBus.ObjectManager')
    adapter = '/org/bluez/hci0'
    # The adapter as GetManagedObjects shows it: interfaces and property names only (values are
    # the controller's).
    managed = objects.GetManagedObjects()
    rec.step = 'adapter'
    rec.emit('objects', path='/org/bluez/hci0', interfaces={
        str(i): sorted(str(k) for k in p) for i, p in managed[dbus.ObjectPath(adapter)].items()})
    if dbus.ObjectPath(DEV_PATH) in managed:
        # Start from scratch like the simulator: earlier tests left the device (and its GATT
        # cache, maybe its link) behind. RemoveDevice disconnects and forgets it (not recorded).
        rec.step = 'cleanup'
        dbus.Interface(bus.get_object('org.bluez', adapter), 'org.bluez.Adapter1').RemoveDevice(
            dbus.ObjectPath(DEV_PATH), timeout=30)
        gone = pump(15, lambda: dbus.ObjectPath(DEV_PATH) not in objects.GetManagedObjects())
        pump(0.5)
        if not gone:
            raise SystemExit('the peripheral could not be removed before the session')

    call('filter', adapter, 'org.bluez.Adapter1', 'SetDiscoveryFilter',
         dbus.Dictionary({'UUIDs': dbus.Array(['180F'], 's'), 'Transport': 'le'}, 'sv'))
    call('discover', adapter, 'org.bluez.Adapter1', 'StartDiscovery', settle=0)
    wait('discover', 'the peripheral', lambda: any(n == 'DEV' for n in [rec.name(DEV_PATH)]) and
         rec.count and DEV_PATH in [str(p) for p in objects.GetManagedObjects()], 45)
    pump(1.0)
    call('discover-again', adapter, 'org.bluez.Adapter1', 'StartDiscovery')
    call('stop-discovery', adapter, 'org.bluez.Adapter1', 'StopDiscovery', settle=0.6)
    call('stop-discovery-again', adapter, 'org.bluez.Adapter1', 'StopDiscovery')

    dev_props = dbus.Interface(bus.get_object('org.bluez', DEV_PATH), PROPS)

    def device(name):
        """Device1.<name>; a removed device is a failed link (bluetoothd drops a temporary device
        whose connection attempt failed): the session is tried again, unless this is the last try."""
        try:
            return bool(dev_props.Get(DEV, name))
        except dbus.exceptions.DBusException as e:
            if e.get_dbus_name() == 'org.freedesktop.DBus.Error.UnknownObject' and not last:
                raise Retry('the peripheral was removed while waiting for %s' % name) from e
            raise

    def connect(step):
        done = call(step, DEV_PATH, DEV, 'Connect', settle=0)
        if 'error' in done and not last:
            raise Retry('%s failed: %s' % (step, done['error'].get_dbus_name()))
        if not wait(step, 'ServicesResolved', lambda: device('ServicesResolved'), 20) and not last:
            raise Retry('%s: no ServicesResolved' % step)

    connect('connect')
    # ServicesResolved may overtake the GATT objects' InterfacesAdded (bluez#1489; under load by
    # more than a second): the step lasts until every object bluetoothd exports has been announced.
    wait('connect', 'the GATT objects', lambda: all(
        str(p) in rec.names for p in objects.GetManagedObjects() if str(p).startswith(DEV_PATH + '/')), 20)
    pump(1.0)
    call('connect-again', DEV_PATH, DEV, 'Connect')
    for path, interfaces in objects.GetManagedObjects().items():  # objects announced before the session
        if str(path).startswith(DEV_PATH + '/') and str(path) not in rec.names:
            rec.learn(path, interfaces)
    # The Device1 property set once connected (names only; the values come from the steps above).
    rec.step = 'connected'
    rec.emit('device-properties', names=sorted(str(k) for k in dev_props.GetAll(DEV)))
    rec.emit('gatt-objects', names=sorted(n for n in rec.names.values() if n.startswith('DEV/')))

    c = char_path
    call('read-2a19', c('2a19'), CHR, 'ReadValue', dbus.Dictionary({}, 'sv'),
         result=lambda v: ['len=%d' % len(v[0])])
    call('read-ff05', c('ff05'), CHR, 'ReadValue', dbus.Dictionary({}, 'sv'))
    call('read-ff05-offset', c('ff05'), CHR, 'ReadValue', dbus.Dictionary({'offset': dbus.UInt16(6)}, 'sv'))
    call('read-ff03-error', c('ff03'), CHR, 'ReadValue', dbus.Dictionary({}, 'sv'))
    call('write-ff04-error', c('ff04'), CHR, 'WriteValue', dbus.Array(b'\x01', 'y'), dbus.Dictionary({}, 'sv'))
    call('write-request', c('ff01'), CHR, 'WriteValue', dbus.Array(b'\x01\x02', 'y'),
         dbus.Dictionary({'type': 'request'}, 'sv'))
    call('read-state', c('ff02'), CHR, 'ReadValue', dbus.Dictionary({}, 'sv'))
    call('write-command', c('ff01'), CHR, 'WriteValue', dbus.Array(b'\x03', 'y'),
         dbus.Dictionary({'type': 'command'}, 'sv'))
    call('read-state-2', c('ff02'), CHR, 'ReadValue', dbus.Dictionary({}, 'sv'))
    call('write-read-only', c('2a19'), CHR, 'WriteValue', dbus.Array(b'\x01', 'y'), dbus.Dictionary({}, 'sv'))
    call('notify-read-only', c('ff05'), CHR, 'StartNotify')
    call('notify-start', c('2a19'), CHR, 'StartNotify', settle=1.0)
    call('notify-start-again', c('2a19'), CHR, 'StartNotify', settle=0.3)
    call('notify-stop', c('2a19'), CHR, 'StopNotify', settle=0.6)
    call('notify-stop-again', c('2a19'), CHR, 'StopNotify')

    fds = {}

    def acquired(values):
        fds['fd'] = values[0].take()
        return ['fd', int(values[1])]
    call('notify-acquire', c('2a6e'), CHR, 'AcquireNotify', dbus.Dictionary({}, 'sv'), result=acquired, settle=0.2)
    datagrams = 0
    if 'fd' in fds:
        end = time.monotonic() + 3
        while datagrams < 2 and time.monotonic() < end:
            ready, _, _ = select.select([fds['fd']], [], [], 0.1)
            if ready and os.read(fds['fd'], 600):
                datagrams += 1
            context.iteration(False)
        rec.emit('datagrams', at_least_two=datagrams >= 2)
        call('notify-acquire-start', c('2a6e'), CHR, 'StartNotify')
        rec.step = 'notify-acquire-close'
        os.close(fds['fd'])
        pump(1.0)

    # bluetoothd replies to Disconnect when the link is down on its side and signals Connected=false
    # when the kernel reports it: up to seconds later under emulation. Wait for it (a missing
    # signal is recorded as a timeout), then settle.
    call('disconnect', DEV_PATH, DEV, 'Disconnect', settle=0)
    wait('disconnect', 'Connected=false', lambda: not device('Connected'), 20)
    pump(1.0)
    call('read-disconnected', c('ff05'), CHR, 'ReadValue', dbus.Dictionary({}, 'sv'))
    call('disconnect-again', DEV_PATH, DEV, 'Disconnect')
    # An adapter power cycle while connected: the order of Connected=false and Powered=false.
    connect('reconnect')
    pump(0.5)
    call('power-off', adapter, PROPS, 'Set', 'org.bluez.Adapter1', 'Powered', dbus.Boolean(False, variant_level=1),
         settle=1.0)
    call('power-on', adapter, PROPS, 'Set', 'org.bluez.Adapter1', 'Powered', dbus.Boolean(True, variant_level=1),
         settle=1.0)
    rec.step = 'end'
    rec.emit('end')
    return rec.count


if __name__ == '__main__':
    main()
