import Bluetooth
import BluetoothManagement
import EventLoop

/// The kernel's side of the simulated controllers: the Bluetooth management protocol on a Unix
/// `SOCK_SEQPACKET` socket (docs/simulator.md, "Management socket"). It outlives a crash of the
/// simulated bluetoothd, as the kernel does; the scan a crashed daemon ran stops.
final class SimulatedManagement {
    let socket: ManagementSocket
    /// What the clients were last told of each controller, by index.
    var announced: [UInt16: ManagementControllerState]

    init(socket: ManagementSocket, announced: [UInt16: ManagementControllerState]) {
        self.socket = socket
        self.announced = announced
    }
}

extension BlueZSimulator {
    /// Serves the management protocol at `path` (``start(scenario:bus:on:log:managementSocket:)``).
    func openManagementSocket(at path: String) throws(ManagementSocketError) {
        let socket = try ManagementSocket(
            path: path, loop: loop, log: { line in self.log?(line) },
            receive: { client, bytes in self.managementReceived(bytes, from: client) })
        management = SimulatedManagement(
            socket: socket, announced: Dictionary(managementControllers().map { ($0.index, $0) }) { first, _ in first })
        log?("simulator: management socket at \(path)")
    }

    /// Closes the management socket (the simulator stops).
    func closeManagementSocket() {
        management?.socket.close()
        management = nil
    }

    /// What the management socket did so far (nil without one).
    public var managementStatistics: ManagementStatistics? { management?.socket.statistics }

    /// The adapters as the kernel sees them: those whose name gives an index (`hciN`, N < 65535).
    /// While the daemon is crashed nothing scans.
    func managementControllers() -> [ManagementControllerState] {
        adapters.compactMap { adapter in
            guard let index = adapter.managementIndex else { return nil }
            return ManagementControllerState(
                index: index, address: adapter.spec.address, present: adapter.present, powered: adapter.powered,
                discovering: connection != nil && adapter.powered && adapter.sessions.isDiscovering,
                name: current("Alias", Self.adapterInterfaceName, at: adapter.path)?.string ?? adapter.spec.alias)
        }
    }

    /// Tells the clients what changed in the controllers since they were last told: Index
    /// Added/Removed, New Settings, Discovering. Called wherever presence, power or a scan changes.
    func managementStateChanged() {
        guard let management else { return }
        let now = Dictionary(managementControllers().map { ($0.index, $0) }) { first, _ in first }
        for index in Set(now.keys).union(management.announced.keys).sorted() {
            for event in ManagementProtocol.events(from: management.announced[index], to: now[index]) {
                management.socket.broadcast(event.bytes)
            }
        }
        management.announced = now
    }

    /// One command from a client: answered to that client; a packet that is not one (its header
    /// and length disagree) drops the client.
    func managementReceived(_ bytes: [UInt8], from client: Int) {
        guard let management else { return }
        let command: ManagementPacket
        do {
            command = try ManagementPacket.decode(bytes)
        } catch {
            management.socket.drop(client, .malformed(error.description))
            return
        }
        let reply = ManagementProtocol.answer(command, controllers: managementControllers())
        management.socket.send(reply.bytes, to: client)
    }

    /// One advertising report of `device`: a Device Found event to every client while its
    /// adapter scans, unless the kernel's part of the scan's filter (the merged UUIDs and RSSI
    /// threshold bluetoothd hands it) drops it. Every report, whether or not it changes a
    /// `Device1` property.
    func managementDeviceFound(_ device: SimulatedDevice, _ report: AdvertisementReport) {
        guard let management, let index = device.adapter.managementIndex,
            management.announced[index]?.discovering == true
        else { return }
        let filter = device.adapter.sessions.merged
        if let uuids = filter.uuids, !report.serviceUUIDs.contains(where: uuids.contains) { return }
        if let threshold = filter.rssi, report.rssi < threshold { return }
        let found = DeviceFound(
            controller: index, address: device.spec.address,
            addressType: device.spec.addressType == .random ? .leRandom : .lePublic,
            rssi: Int8(clamping: report.rssi),
            flags: device.spec.connectable ? 0 : DeviceFound.notConnectable,
            data: device.advertisingData(report))
        management.socket.broadcast(found.packet.bytes)
    }
}

extension SimulatedAdapter {
    /// The controller index of `hciN` (N), nil past the protocol's range.
    var managementIndex: UInt16? {
        guard let number = Int(spec.name.dropFirst(3)), number >= 0, number < Int(UInt16.max) else { return nil }
        return UInt16(number)
    }
}

extension SimulatedDevice {
    /// The advertising data (AD structures) of one report as the device sends it: Flags (LE
    /// General Discoverable when discoverable, BR/EDR Not Supported), then what the report
    /// carries, built by the AD builder (``AdvertisementBytes``: advertisement and scan response
    /// together hold 62 bytes, so the flags are left out when the rest fills them).
    func advertisingData(_ report: AdvertisementReport) -> [UInt8] {
        let flags: UInt8 = (spec.discoverable ? 0x02 : 0) | 0x04
        var manufacturerData: [UInt16: [UInt8]] = [:]
        for entry in report.manufacturerData { manufacturerData[entry.companyID] = entry.bytes }
        var serviceData: [BluetoothUUID: [UInt8]] = [:]
        for entry in report.serviceData { serviceData[entry.uuid] = entry.bytes }
        let advertisement = AdvertisementData(
            localName: report.name, serviceUUIDs: report.serviceUUIDs, manufacturerData: manufacturerData,
            serviceData: serviceData, txPower: report.txPower.map { Int8(clamping: $0) })
        let bytes = AdvertisementBytes.build(advertisement)
        return bytes.count + 3 <= AdvertisementBytes.maximumLength ? [2, 0x01, flags] + bytes : bytes
    }
}
