import Bluetooth
import BluetoothManagement
import DBus
import EventLoop

/// A device that is another adapter of the simulator (`links[]`): the two sides of a link
/// between simulated adapters (BlueZSimulator+Link.swift has what the peripheral side shows).
extension SimulatedDevice {
    /// The central side's link came up: the central's address appears connected on the
    /// peripheral adapter (a Device1 there, services resolved after `resolve_delay`).
    func mirrorLinkUp(in simulator: isolated BlueZSimulator) {
        guard let mirror, let peripheral = simulator.adapter(named: mirror.peripheralAdapter),
            let path = try? peripheral.path.appending(adapter.spec.address.bluezPathComponent)
        else { return }
        let counterpart: SimulatedDevice
        if let existing = simulator.devices[path] {
            counterpart = existing
        } else {
            let spec = DeviceSpec(
                address: adapter.spec.address, addressType: .public, adapter: peripheral.spec.name, name: nil,
                rssi: -50,
                rssiJitter: 0, interval: 0, connectable: true, discoverable: false, txPower: nil, appearance: nil,
                serviceUUIDs: [], manufacturerData: [], serviceData: [], services: [], faults: FaultSpec())
            guard let created = try? SimulatedDevice(spec: spec, adapter: peripheral, seed: simulator.scenario.seed)
            else { return }
            simulator.devices[path] = created
            simulator.deviceOrder.append(path)
            counterpart = created
        }
        counterpart.stopTemporaryTimer(in: simulator)
        counterpart.linkedTo = self.path
        linkedTo = path
        counterpart.link = .connected
        if counterpart.exported {
            simulator.change([("Connected", .boolean(true))], interface: BlueZSimulator.deviceInterface, at: path)
        } else {
            counterpart.export(in: simulator)
        }
        counterpart.resolveTimer = simulator.after(simulator.timing.resolveDelay) {
            simulator.devices[path]?.servicesResolved(in: simulator)
        }
        let central = adapter.spec.name
        if simulator.scenario.links.contains(where: {
            $0.peer(of: peripheral.spec.name) == central && !$0.resumesAdvertising
        }) {
            peripheral.advertising.stopConnectable()
            simulator.log?("simulator: \(peripheral.spec.name) stopped advertising: a central connected")
            simulator.peripheralChanged(peripheral)
        }
    }

    /// A link between two simulated adapters went down on one side: the other side follows.
    func linkedLinkDown(in simulator: isolated BlueZSimulator) {
        guard let other = linkedTo else { return }
        linkedTo = nil
        guard let counterpart = simulator.devices[other] else { return }
        counterpart.linkedTo = nil
        counterpart.peerDisconnect(.remote, in: simulator)
    }

    /// The options bluetoothd passes to an application's ReadValue/WriteValue on behalf of this
    /// (central) device: its object on the peripheral side (nil when the link is down).
    func applicationOptions(offset: UInt16, in simulator: isolated BlueZSimulator) -> DBusValue? {
        linkedTo.map { simulator.applicationOptions(device: $0, offset: offset) }
    }
}
