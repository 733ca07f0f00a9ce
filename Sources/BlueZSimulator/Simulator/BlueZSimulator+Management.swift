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
    /// The advertisement monitors of each controller (by index): their handles. Kernel state:
    /// they outlive the client that added them; the simulated bluetoothd removes them all when
    /// it starts, as bluetoothd 5.66 does when it takes a controller on.
    var monitors: [UInt16: Set<UInt16>] = [:]
    /// The next monitor handle (the kernel counts from 1).
    var nextMonitorHandle: UInt16 = 1
    /// The connection parameters loaded per controller (by index) and address: what the next
    /// link to the device asks for (Load Connection Parameters).
    var connectionParameters: [UInt16: [BluetoothAddress: ConnectionParameters]] = [:]

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
        typealias Code = ManagementCommand.Code
        if command.code == Code.addAdvertisementPatternsMonitor || command.code == Code.removeAdvertisementMonitor {
            return monitorCommand(command, from: client, management)
        }
        if command.code == Code.loadConnectionParameters {
            return loadConnectionParameters(command, from: client, management)
        }
        let reply = ManagementProtocol.answer(command, controllers: managementControllers())
        management.socket.send(reply.bytes, to: client)
    }

    /// Add Advertisement Patterns Monitor and Remove Advertisement Monitor, as kernel 6.1 without
    /// controller offload: the patterns are checked for their layout, then ignored (every report
    /// is delivered); Advertisement Monitor Added/Removed go to every other client.
    private func monitorCommand(_ command: ManagementPacket, from client: Int, _ management: SimulatedManagement) {
        typealias Status = ManagementCommand.Status
        func status(_ status: UInt8) {
            management.socket.send(
                ManagementEvent.commandStatus(opcode: command.code, status: status, controller: command.controller)
                    .packet.bytes, to: client)
        }
        func complete(_ handle: UInt16) {
            let parameters = [UInt8(truncatingIfNeeded: handle), UInt8(truncatingIfNeeded: handle >> 8)]
            management.socket.send(
                ManagementEvent.commandComplete(
                    opcode: command.code, status: Status.success, controller: command.controller,
                    parameters: parameters
                ).packet.bytes, to: client)
        }
        let index = command.controller
        guard managementControllers().contains(where: { $0.index == index && $0.present }) else {
            return status(Status.invalidIndex)
        }
        var removed: [UInt16] = []
        if command.code == ManagementCommand.Code.addAdvertisementPatternsMonitor {
            // Kernel 6.1 refuses a monitor without a pattern.
            guard let patterns = try? AdvertisementPattern.decodeList(command.parameters), !patterns.isEmpty else {
                return status(Status.invalidParameters)
            }
            guard management.monitors[index, default: []].count < ManagementProtocol.maximumMonitors else {
                return status(Status.noResources)
            }
            let handle = management.nextMonitorHandle
            management.nextMonitorHandle = handle == UInt16.max ? 1 : handle + 1
            management.monitors[index, default: []].insert(handle)
            complete(handle)
            management.socket.broadcast(
                ManagementEvent.advertisementMonitorAdded(controller: index, handle: handle).packet.bytes,
                except: client)
        } else {
            guard let handle = try? ManagementCommand.decodeMonitorHandle(command.parameters, command: command.code),
                command.parameters.count == 2
            else { return status(Status.invalidParameters) }
            let held = management.monitors[index, default: []]
            guard handle == 0 || held.contains(handle) else { return status(Status.invalidParameters) }
            removed = handle == 0 ? held.sorted() : [handle]
            management.monitors[index] = held.subtracting(removed)
            complete(handle)
            for gone in removed {
                management.socket.broadcast(
                    ManagementEvent.advertisementMonitorRemoved(controller: index, handle: gone).packet.bytes,
                    except: client)
            }
        }
        passiveScanChanged(controller: index)
    }

    /// Load Connection Parameters, as kernel 6.1 does it: a count that does not match the length
    /// is Invalid Parameters; otherwise the controller's entries are replaced (the kernel first
    /// drops every entry no auto-connect or pending connect uses: in the simulator, all of them),
    /// an entry that is not LE or that the kernel's own check refuses is skipped, and the answer
    /// is success. A link that is up keeps its parameters.
    private func loadConnectionParameters(
        _ command: ManagementPacket, from client: Int, _ management: SimulatedManagement
    ) {
        typealias Status = ManagementCommand.Status
        let index = command.controller
        let status: UInt8
        if !managementControllers().contains(where: { $0.index == index && $0.present }) {
            status = Status.invalidIndex
        } else if let entries = try? ConnectionParameterEntry.decodeList(command.parameters) {
            var loaded: [BluetoothAddress: ConnectionParameters] = [:]
            for entry in entries {
                guard entry.addressType == .lePublic || entry.addressType == .leRandom,
                    ManagementProtocol.kernelAccepts(entry.parameters)
                else {
                    log?(
                        "simulator: Load Connection Parameters: \(entry.address) ignored (invalid, as the kernel logs it)"
                    )
                    continue
                }
                loaded[entry.address] = entry.parameters
            }
            management.connectionParameters[index] = loaded
            status = Status.success
        } else {
            status = Status.invalidParameters
        }
        let reply =
            status == Status.success
            ? ManagementEvent.commandComplete(
                opcode: command.code, status: status, controller: index, parameters: []
            ).packet
            : ManagementEvent.commandStatus(opcode: command.code, status: status, controller: index).packet
        management.socket.send(reply.bytes, to: client)
    }

    /// The parameters a new link of `adapter` to `address` asks for: those loaded for it, else
    /// the kernel's defaults.
    func linkParameters(_ adapter: SimulatedAdapter, _ address: BluetoothAddress) -> ConnectionParameters {
        guard let index = adapter.managementIndex, let loaded = management?.connectionParameters[index]?[address]
        else { return ManagementProtocol.defaultConnectionParameters }
        return loaded
    }

    /// Every monitor goes (the simulated bluetoothd starts and resets them, as bluetoothd 5.66
    /// does for each controller it takes on): Advertisement Monitor Removed for each.
    func resetMonitors() {
        guard let management else { return }
        for (index, handles) in management.monitors.sorted(by: { $0.key < $1.key }) {
            for handle in handles.sorted() {
                management.socket.broadcast(
                    ManagementEvent.advertisementMonitorRemoved(controller: index, handle: handle).packet.bytes)
            }
        }
        management.monitors = [:]
    }

    /// Whether the kernel scans `adapter` passively for a monitor: powered, present, at least
    /// one monitor, and no discovery (which scans actively in its place).
    func passivelyScanning(_ adapter: SimulatedAdapter) -> Bool {
        guard let management, let index = adapter.managementIndex, adapter.powered, adapter.present,
            !adapter.sessions.isDiscovering
        else { return false }
        return !(management.monitors[index]?.isEmpty ?? true)
    }

    /// Whether `adapter` hears advertisements: a discovery or a monitor's passive scan.
    func isScanning(_ adapter: SimulatedAdapter) -> Bool {
        adapter.sessions.isDiscovering || passivelyScanning(adapter)
    }

    /// A monitor came or went, or a discovery ended: the devices of that controller go on the
    /// advertising schedule while it scans, off it when it stops.
    func passiveScanChanged(controller index: UInt16) {
        guard let adapter = adapters.first(where: { $0.managementIndex == index }) else { return }
        passiveScanChanged(adapter)
    }

    func passiveScanChanged(_ adapter: SimulatedAdapter) {
        guard connection != nil || passivelyScanning(adapter) else { return }
        if isScanning(adapter) {
            let (now, wall) = AdvertisingClock.now()
            for path in deviceOrder {
                guard let device = devices[path], device.adapter === adapter, device.spec.interval > 0,
                    !schedule.contains(path)
                else { continue }
                schedule(device, now: now, wall: wall)
            }
            armSchedule()
        } else {
            unschedule(adapter)
        }
    }

    /// One advertising report of `device`: a Device Found event to every client while its
    /// adapter scans, unless the kernel's part of the scan's filter (the merged UUIDs and RSSI
    /// threshold bluetoothd hands it) drops it. Every report, whether or not it changes a
    /// `Device1` property.
    ///
    /// The kernel's Device Disconnected for a link of `device` that went down.
    func managementDisconnected(_ device: SimulatedDevice, reason: DisconnectReason) {
        guard let management, let index = device.adapter.managementIndex else { return }
        let event = ManagementEvent.deviceDisconnected(
            controller: index, address: device.spec.address,
            addressType: device.spec.addressType == .random ? .leRandom : .lePublic, reason: reason)
        management.socket.broadcast(event.packet.bytes)
    }

    /// Without a discovery, while a monitor holds the passive scan: Advertisement Monitor Device
    /// Found with handle 0 (no offload: every report, for software filtering), without the
    /// scan response — the simulated devices send their name there, so a passive report has none.
    func managementDeviceFound(_ device: SimulatedDevice, _ report: AdvertisementReport) {
        guard let management, let index = device.adapter.managementIndex else { return }
        var report = report
        var monitorHandle: UInt16?
        if management.announced[index]?.discovering == true {
            let filter = device.adapter.sessions.merged
            if let uuids = filter.uuids, !report.serviceUUIDs.contains(where: uuids.contains) { return }
            if let threshold = filter.rssi, report.rssi < threshold { return }
        } else if passivelyScanning(device.adapter) {
            report.name = nil
            monitorHandle = 0
        } else {
            return
        }
        let found = DeviceFound(
            controller: index, address: device.spec.address,
            addressType: device.spec.addressType == .random ? .leRandom : .lePublic,
            rssi: Int8(clamping: report.rssi),
            flags: device.spec.connectable ? 0 : DeviceFound.notConnectable,
            data: device.advertisingData(report), monitorHandle: monitorHandle)
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
