import Bluetooth
import BluetoothManagement
import DBus
import EventLoop
import JSON

/// A control call's arguments, read as the control interface does: a missing or mistyped one is
/// empty (the export layer checked the signature).
struct ControlArguments {
    var values: [DBusValue]

    func string(_ index: Int) -> String { values[index].string ?? "" }
    func bytes(_ index: Int) -> [UInt8] { values[index].bytes ?? [] }
    func bool(_ index: Int) -> Bool { values[index].bool ?? true }
}

/// Errors of the control interface `io.gattway.Simulator1`.
enum ControlError {
    static func make(_ name: String, _ message: String) -> DBusError {
        DBusError(DBusError.Name("io.gattway.Simulator1.Error." + name), message)
    }
    static func notFound(_ what: String) -> DBusError { make("NotFound", what) }
    static func invalid(_ what: String) -> DBusError { make("InvalidArguments", what) }
}

extension BlueZSimulator {
    /// `io.gattway.Simulator1` (documented in docs/simulator.md).
    func controlInterfaceDefinition() -> DBusInterface {
        DBusInterface(
            Self.controlInterface,
            methods: [
                .immediate("AddDevice", in: [.string], out: [.objectPath]) { call in
                    try self.onLoop { [.objectPath(try $0.addDevice(json: call.arguments[0].string ?? ""))] }
                },
                command("RemoveDevice", [.string]) { try $0.removeDevice(address: $1.string(0)) },
                command("SetValue", [.string, .string, .array(.byte)]) {
                    try $0.setValue(address: $1.string(0), uuid: $1.string(1), $1.bytes(2))
                },
                command("Notify", [.string, .string, .array(.byte)]) {
                    try $0.notify(address: $1.string(0), uuid: $1.string(1), $1.bytes(2))
                },
                command("Burst", [.string, .string, .uint32, .double]) {
                    try $0.burst(
                        address: $1.string(0), uuid: $1.string(1), count: Int($1.values[2].uint32 ?? 0),
                        rate: $1.values[3].double ?? 0)
                },
                command("SetRSSI", [.string, .int16]) {
                    try $0.setRSSI(address: $1.string(0), Double($1.values[1].int16 ?? 0))
                },
                command("Disconnect", [.string]) { try $0.disconnectPeer(address: $1.string(0)) },
                command("Terminate", [.string]) { try $0.disconnectPeer(address: $1.string(0), reason: .remote) },
                .immediate("LinkParameters", in: [.string], out: [.uint16, .uint16, .uint16]) { call in
                    try self.onLoop { simulator in
                        let link = try simulator.linkParameters(address: call.arguments[0].string ?? "")
                        return [.uint16(link.interval), .uint16(link.latency), .uint16(link.supervisionTimeout)]
                    }
                },
                command("SetPowered", [.string, .boolean]) {
                    try $0.controlledAdapter($1).setPowered($1.bool(1), in: $0)
                },
                command("SetBlocked", [.string, .boolean]) {
                    try $0.controlledAdapter($1).setBlocked($1.bool(1), in: $0)
                },
                command("SetPresent", [.string, .boolean]) {
                    try $0.controlledAdapter($1).setPresent($1.bool(1), in: $0)
                },
                .immediate("Crash", in: [.double]) { call in
                    let restart = call.arguments[0].double ?? -1
                    self.onLoop { simulator in
                        // Reply first, then die (the reply would be lost otherwise).
                        simulator.loop.execute {
                            simulator.assumeIsolated { $0.crashNow(restartAfter: restart >= 0 ? restart : nil) }
                        }
                    }
                    return []
                },
                .immediate("RecordedWrites", out: [.array(.dictionary(key: .string, value: .variant))]) { _ in
                    self.onLoop { [$0.recordedWritesValue()] }
                },
                command("ClearRecordedWrites", .empty) { simulator, _ in simulator.writes.removeAll() },
                .immediate("Counters", out: [.dictionary(key: .string, value: .uint64)]) { _ in
                    self.onLoop { simulator in
                        [
                            .dictionary(
                                key: .string, value: .uint64,
                                simulator.counters.dictionary.map { DBusDictionaryEntry(.string($0.0), .uint64($0.1)) })
                        ]
                    }
                },
            ])
    }

    func recordedWritesValue() -> DBusValue {
        .array(
            .dictionary(key: .string, value: .variant),
            writes.map { write in
                .variantDictionary([
                    ("Adapter", .string(write.adapter)), ("Device", .string(write.device.description)),
                    ("UUID", .string(write.uuid.description)), ("Path", .string(write.path)),
                    ("Value", .bytes(write.value)),
                    ("Offset", .uint16(write.offset)), ("Type", .string(write.type)), ("Time", .double(write.time)),
                ])
            })
    }

    /// A control method without a result: `body` runs on the simulator with the call's arguments.
    private func command(
        _ name: String, _ signature: DBusSignature,
        _ body: @escaping @Sendable (isolated BlueZSimulator, ControlArguments) throws -> Void
    ) -> DBusMethod {
        .immediate(name, in: signature) { call in
            try self.onLoop { try body($0, ControlArguments(values: call.arguments)) }
            return []
        }
    }

    /// The adapter named by a control call's first argument.
    func controlledAdapter(_ arguments: ControlArguments) throws -> SimulatedAdapter {
        let name = arguments.string(0)
        guard let adapter = adapter(named: name) else { throw ControlError.notFound("no adapter \(name)") }
        return adapter
    }

    // MARK: Swift API (also behind the control interface)

    /// Blocks or unblocks the adapter's radio, as `rfkill block bluetooth` does
    /// (``SimulatedAdapter/setBlocked(_:in:)``).
    public func setBlocked(adapter name: String, _ blocked: Bool) {
        adapter(named: name)?.setBlocked(blocked, in: self)
    }

    /// Plugs the adapter in (its object appears: `InterfacesAdded`) or out (it powers off, its
    /// devices and then its object go: `InterfacesRemoved`).
    public func setPresent(adapter name: String, _ present: Bool) throws {
        guard let adapter = adapter(named: name) else { throw ControlError.notFound("no adapter \(name)") }
        adapter.setPresent(present, in: self)
    }

    /// The device with `address` (on any adapter; the first one in scenario order).
    func device(address: String) throws -> SimulatedDevice {
        guard let parsed = BluetoothAddress(address) else {
            throw ControlError.invalid("\"\(address)\" is not a Bluetooth address")
        }
        for path in deviceOrder {
            if let device = devices[path], device.spec.address == parsed { return device }
        }
        throw ControlError.notFound("no device \(address)")
    }

    func characteristic(address: String, uuid: String) throws -> (SimulatedDevice, SimulatedCharacteristic) {
        let device = try device(address: address)
        guard let parsed = BluetoothUUID(uuid) else { throw ControlError.invalid("\"\(uuid)\" is not a UUID") }
        guard let characteristic = device.characteristic(uuid: parsed) else {
            throw ControlError.notFound("device \(address) has no characteristic \(uuid)")
        }
        return (device, characteristic)
    }

    /// Adds a device (scenario JSON of one `devices[]` entry); returns its object path. It
    /// appears on the bus when a scan sees it.
    @discardableResult
    public func addDevice(json: String) throws -> DBusObjectPath {
        let spec: DeviceSpec
        do {
            spec = try DeviceSpec.parse(
                json.utf8, adapters: Set(scenario.adapters.map(\.name)), defaultAdapter: scenario.adapters[0].name)
        } catch {
            throw ControlError.invalid("\(error)")
        }
        return try addDevice(spec)
    }

    /// Adds a device; returns its object path.
    @discardableResult
    public func addDevice(_ spec: DeviceSpec) throws -> DBusObjectPath {
        guard let adapter = adapter(named: spec.adapter) else {
            throw ControlError.notFound("no adapter \(spec.adapter)")
        }
        let device = try SimulatedDevice(spec: spec, adapter: adapter, seed: scenario.seed)
        guard devices[device.path] == nil else {
            throw ControlError.make("AlreadyExists", "\(spec.address) exists on \(spec.adapter)")
        }
        devices[device.path] = device
        deviceOrder.append(device.path)
        addedSpecs.append(spec)
        removedAddresses.remove(spec.address.description)
        if isScanning(adapter) && spec.interval > 0 {
            let (now, wall) = AdvertisingClock.now()
            schedule(device, now: now, wall: wall)
            armSchedule()
        }
        armRotation(spec)
        return device.path
    }

    /// The addresses of the devices in the world now (a rotating device's current one).
    public var deviceAddresses: [BluetoothAddress] { deviceOrder.compactMap { devices[$0]?.spec.address } }

    /// A device with an IRK and `rpa_rotation`: its next address after the period.
    func armRotation(_ spec: DeviceSpec) {
        guard spec.irk != nil, let period = spec.rpaRotation else { return }
        let address = spec.address
        after(period) { self.rotate(address) }
    }

    /// The device at `address` takes its next resolvable private address: it leaves the world
    /// (its object goes, as when a phone's old address is forgotten) and comes back at once from
    /// the new address, with everything else as it was.
    func rotate(_ address: BluetoothAddress) {
        guard let device = devices.values.first(where: { $0.spec.address == address }), let irk = device.spec.irk
        else { return }
        var spec = device.spec
        spec.rpaIndex &+= 1
        guard let next = DeviceSpec.resolvablePrivateAddress(irk: irk, index: spec.rpaIndex) else { return }
        spec.address = next
        guard (try? removeDevice(address: address.description)) != nil else { return }
        _ = try? addDevice(spec)
    }

    /// Removes a device from the world: the link drops, its objects go (InterfacesRemoved).
    public func removeDevice(address: String) throws {
        let device = try device(address: address)
        if device.isConnected { device.linkDown(reason: .timeout, in: self) }
        device.abortConnect(BlueZError.failed("le-connection-abort-by-local"), in: self)
        device.unexport(in: self)
        devices.removeValue(forKey: device.path)
        deviceOrder.removeAll { $0 == device.path }
        addedSpecs.removeAll { $0.address == device.spec.address }
        removedAddresses.insert(device.spec.address.description)
    }

    /// Moves the device: its advertisements are heard at `rssi` dBm from now on (the scenario's
    /// jitter stays).
    public func setRSSI(address: String, _ rssi: Double) throws {
        guard rssi.isFinite, (-127...20).contains(rssi) else {
            throw ControlError.invalid("RSSI \(rssi) is not from -127 to 20 dBm")
        }
        try device(address: address).spec.rssi = rssi
    }

    /// Sets what the peripheral returns to the next read (no signal: BlueZ only learns on a read).
    public func setValue(address: String, uuid: String, _ bytes: [UInt8]) throws {
        let (_, characteristic) = try characteristic(address: address, uuid: uuid)
        characteristic.peerValue = bytes
        characteristic.readSource = nil
    }

    /// The peripheral notifies `bytes` once (also becomes its value).
    public func notify(address: String, uuid: String, _ bytes: [UInt8]) throws {
        let (device, characteristic) = try characteristic(address: address, uuid: uuid)
        characteristic.peerValue = bytes
        try Self.requireNotifiable(device, characteristic, address: address, uuid: uuid)
        characteristic.deliver(bytes, of: device, in: self)
    }

    /// NotConnected unless the device is connected, NotSubscribed unless someone receives the
    /// characteristic's notifications.
    static func requireNotifiable(
        _ device: SimulatedDevice, _ characteristic: SimulatedCharacteristic, address: String, uuid: String
    ) throws {
        guard case .connected = device.link else {
            throw ControlError.make("NotConnected", "\(address) is not connected")
        }
        guard characteristic.isSubscribed else {
            throw ControlError.make(
                "NotSubscribed", "nobody subscribed to \(uuid) (StartNotify or AcquireNotify first)")
        }
    }

    /// Starts a burst of `count` notifications with a u32 little-endian sequence number (0, 1, …)
    /// at `rate` per second, or as fast as possible when `rate` is 0; returns at once.
    public func burst(address: String, uuid: String, count: Int, rate: Double) throws {
        let (device, characteristic) = try characteristic(address: address, uuid: uuid)
        try Self.requireNotifiable(device, characteristic, address: address, uuid: uuid)
        guard count > 0, rate >= 0 else { throw ControlError.invalid("count must be > 0 and rate ≥ 0") }
        bursts.append(
            BurstState(
                device: device.path, characteristic: characteristic.path, count: count, rate: rate,
                started: EventLoop.now()))
        if bursts.count == 1 { loop.execute { [self] in self.assumeIsolated { $0.runBursts() } } }
    }

    /// Emits the due part of every burst, in batches per loop turn (no task per notification);
    /// backs off for a millisecond while libdbus has more than 8 MB queued.
    func runBursts() {
        guard !bursts.isEmpty, let connection else { return }
        if connection.assumeIsolated({ $0.outgoingQueueSize }) > 8 << 20 {
            after(0.001) { self.runBursts() }
            return
        }
        let now = EventLoop.now()
        var nextDelay: Double? = nil
        var index = 0
        while index < bursts.count {
            var burst = bursts[index]
            guard let device = devices[burst.device],
                let characteristic = device.characteristic(at: burst.characteristic)
            else {
                bursts.remove(at: index)
                continue
            }
            var due = burst.count - burst.sent
            if burst.rate > 0 {
                // The rate comes over D-Bus: infinity (or 0 × infinity, NaN) means all at once.
                let produced = Double(now - burst.started) / 1e9 * burst.rate
                if produced < Double(burst.count) { due = min(due, Int(produced) + 1 - burst.sent) }
            }
            let batch = min(max(due, 0), 512)
            for _ in 0..<batch {
                let sequence = UInt32(truncatingIfNeeded: burst.sent)
                let bytes = (0..<4).map { UInt8(truncatingIfNeeded: sequence >> (8 * $0)) }
                characteristic.peerValue = bytes
                guard characteristic.deliver(bytes, of: device, in: self) else { break }
                burst.sent += 1
            }
            if burst.sent >= burst.count || !characteristic.isSubscribed || !device.isConnected {
                counters.lastBurstCount = burst.sent
                counters.lastBurstSeconds = Double(EventLoop.now() - burst.started) / 1e9
                log?("simulator: burst of \(burst.sent) in \(counters.lastBurstSeconds) s")
                bursts.remove(at: index)
                continue
            }
            bursts[index] = burst
            if burst.rate > 0 {
                let delay = max(0.001, 1 / burst.rate)
                nextDelay = min(nextDelay ?? delay, delay)
            } else {
                nextDelay = 0
            }
            index += 1
        }
        guard let nextDelay else { return }
        if nextDelay == 0 {
            loop.execute { [self] in self.assumeIsolated { $0.runBursts() } }
        } else {
            after(nextDelay) { self.runBursts() }
        }
    }

    /// The live link to a device as the controller made it: the interval (1.25 ms units), the
    /// latency and the supervision timeout (10 ms units); NotFound for an unknown device,
    /// NotConnected when its link is down.
    public func linkParameters(address: String) throws -> (
        interval: UInt16, latency: UInt16, supervisionTimeout: UInt16
    ) {
        let device = try device(address: address)
        guard device.isConnected, let parameters = device.linkParameters else {
            throw ControlError.make("NotConnected", "\(address) is not connected")
        }
        return (parameters.maxInterval, parameters.latency, parameters.supervisionTimeout)
    }

    /// The peer drops the link now: by default as one that went out of range (the kernel says
    /// supervision timeout); `.remote` as one that ended the link itself.
    /// A device heard by several adapters (one simulated device each) drops every link it has.
    public func disconnectPeer(address: String, reason: DisconnectReason = .timeout) throws {
        let first = try device(address: address)
        for path in deviceOrder {
            guard let device = devices[path], device.spec.address == first.spec.address else { continue }
            device.peerDisconnect(reason, in: self)
        }
    }

    /// Powers an adapter off or on (as `Powered` set by a client, or a scenario event).
    public func setPowered(adapter name: String, _ on: Bool) {
        adapter(named: name)?.setPowered(on, in: self)
    }

    /// Counters as of now.
    public func counterValues() -> SimulatorCounters { counters }

    /// What a peer received in writes to one of its characteristics (requests and commands)
    /// since the start or the last `ClearRecordedWrites`: how many writes and bytes, the FNV-1a
    /// (32-bit) of the bytes in the order they arrived (a lost, doubled or reordered write
    /// changes it), and when the first and the last arrived (s since the simulator started).
    public func received(device: BluetoothAddress, uuid: BluetoothUUID) -> ReceivedBytes {
        var received = ReceivedBytes()
        for write in writes where write.device == device && write.uuid == uuid && write.type != "descriptor" {
            received.add(write.value, at: write.time)
        }
        return received
    }

    /// BlueZ's timings from now on (a device that turns slow: a longer `gatt_latency`); what is
    /// already scheduled keeps its time.
    public func setTiming(_ timing: TimingSpec) { scenario.timing = timing }

    /// The timings in use.
    public var currentTiming: TimingSpec { timing }

    /// Forgets the recorded writes (as the control interface's `ClearRecordedWrites`).
    public func clearRecordedWrites() { writes.removeAll() }

    /// Starts keeping when each advertising report is due and sent (``ReportTime``), from now
    /// until ``stopRecordingReports()``: how a workload's reports are spread over time.
    public func startRecordingReports() { reportTimes = [] }

    /// The reports since ``startRecordingReports()``, in the order sent; stops recording.
    public func stopRecordingReports() -> [ReportTime] {
        defer { reportTimes = nil }
        return reportTimes ?? []
    }
}
