import Bluetooth
import DBus
import EventLoop

/// A virtual bluetoothd: owns `org.bluez` on a bus and behaves towards central clients as BlueZ
/// 5.66 does (objects, discovery, connections, remote GATT), driven by a ``Scenario``.
///
/// The world is made of per-object types that own their state and behaviour:
/// ``SimulatedAdapter`` (power, rfkill, discovery), its ``AdvertisingManager``
/// (LEAdvertisingManager1) and ``GATTApplications`` (GattManager1, the local database),
/// ``SimulatedDevice`` (advertising, bluetoothd's cache, link, pairing) and its
/// ``SimulatedCharacteristic``s (GATT procedures, notify sessions, acquired sockets). The actor
/// holds them and is the glue: it exports their objects and dispatches method calls to them
/// (BlueZSimulator+Objects.swift), queues and emits signals, runs timers, the advertising
/// schedule, the links between adapters and the control interface.
///
/// The simulator is an actor on the ``EventLoop`` (its executor is the loop thread, like the
/// ``DBusConnection`` it uses), so method handlers, timers and the advertising schedule all run
/// on that one thread without locks or sleeping threads. Property changes are coalesced per
/// object and interface and flushed once per loop turn (bluetoothd's gdbus idle flush), except
/// `GattCharacteristic1.Value`, which is emitted immediately.
///
/// Start one with ``start(scenario:bus:on:)``; stop it with ``stop()``. Tests steer it through
/// the Swift API here or through the control interface `io.gattway.Simulator1` at
/// `/io/gattway/Simulator` (docs/simulator.md).
public actor BlueZSimulator {
    /// The control interface and its object path.
    public static let controlInterface = "io.gattway.Simulator1"
    public static let controlPath: DBusObjectPath = "/io/gattway/Simulator"

    public nonisolated let loop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    let bus: DBusConnection.Bus
    var scenario: Scenario
    var timing: TimingSpec { scenario.timing }
    var connection: DBusConnection?
    /// Bumped by crash/stop: timers of an older generation do nothing.
    var generation = 0
    var adapters: [SimulatedAdapter] = []
    /// Devices in scenario order (plus ones added later), by path.
    var devices: [DBusObjectPath: SimulatedDevice] = [:]
    var deviceOrder: [DBusObjectPath] = []
    /// Devices added through the control interface (kept across a restart).
    var addedSpecs: [DeviceSpec] = []
    var removedAddresses: Set<String> = []
    var schedule = DeadlineHeap<DBusObjectPath>()
    var scheduleTimer: EventLoop.Token?
    var pendingSignals: [(path: DBusObjectPath, interface: String, names: [String])] = []
    var flushScheduled = false
    var agents: [String: DBusObjectPath] = [:]
    /// The agents' owners in the order they registered (the first is the default agent).
    var agentOrder: [String] = []
    var eventTimers: [EventLoop.Token] = []
    var clientWatch: Task<Void, Never>?
    /// When the simulator started (`EventLoop.now()`, ns): `RecordedWrite.time` counts from it.
    public nonisolated let startTime = EventLoop.now()
    var counters = SimulatorCounters()
    /// Advertising reports' times while recording (``startRecordingReports()``).
    var reportTimes: [ReportTime]?
    var writes: [RecordedWrite] = []
    var bursts: [BurstState] = []
    var log: (@Sendable (String) -> Void)?
    /// Signal subscriptions on peripheral applications (one per unique name, counted by the
    /// applications and advertisements it registered).
    var ownerWatches: [String: (task: Task<Void, Never>, users: Int)] = [:]
    /// The management protocol's socket, when served (BlueZSimulator+Management.swift).
    var management: SimulatedManagement?

    init(scenario: Scenario, bus: DBusConnection.Bus, loop: EventLoop) {
        self.scenario = scenario
        self.bus = bus
        self.loop = loop
    }

    /// Connects to `bus`, exports the adapters, takes `org.bluez` and schedules the scenario's
    /// timed events. Devices appear once a client discovers (or when connected by path).
    /// With `managementSocket`, the kernel's Bluetooth management protocol is served for the
    /// adapters on a Unix `SOCK_SEQPACKET` socket at that path (docs/simulator.md, "Management
    /// socket"); ``stop()`` removes it.
    /// - Throws: ``DBusError`` when the bus cannot be reached or the name is taken;
    ///   ``ManagementSocketError`` when the socket cannot be made.
    public static func start(
        scenario: Scenario, bus: DBusConnection.Bus = .system, on loop: EventLoop,
        log: (@Sendable (String) -> Void)? = nil, managementSocket: String? = nil
    ) async throws -> BlueZSimulator {
        let simulator = BlueZSimulator(scenario: scenario, bus: bus, loop: loop)
        await simulator.setLog(log)
        if let managementSocket { try await simulator.openManagementSocket(at: managementSocket) }
        do {
            try await simulator.bringUp()
        } catch {
            await simulator.closeManagementSocket()
            throw error
        }
        await simulator.scheduleEvents()
        return simulator
    }

    private func setLog(_ log: (@Sendable (String) -> Void)?) { self.log = log }

    /// The simulator's unique name on the bus (nil while crashed).
    public var uniqueName: String? { connection?.uniqueName }

    /// What happened so far.
    public var currentCounters: SimulatorCounters { counters }

    /// Writes the simulated peripherals received, oldest first.
    public var recordedWrites: [RecordedWrite] { writes }

    /// The advertisements applications registered on the adapter named `adapter` ("hci1"), as
    /// bluetoothd read them, in registration order (what a test cannot see from a scanning
    /// adapter: bluetoothd does not show a device's solicited UUIDs in `Device1`).
    public func registeredAdvertisements(on adapter: String) -> [LEAdvertisementData] {
        self.adapter(named: adapter)?.advertising.advertisements.compactMap(\.data) ?? []
    }

    /// Seconds since start.
    var elapsed: Double { Double(EventLoop.now() - startTime) / 1e9 }

    /// Builds the world from the scenario and goes on the bus.
    func bringUp() async throws {
        let connection = try await DBusConnection.connect(to: bus, on: loop)
        generation += 1
        self.connection = connection
        // What bluetoothd keeps in its storage (/var/lib/bluetooth) across a restart: the
        // devices that were no longer temporary (connected with a public or static address,
        // paired), with their name, services and bond; loaded at its start, disconnected.
        let stored = devices.values.filter { $0.exported && !$0.temporary }.map {
            (path: $0.path, paired: $0.paired, cache: $0.cache.stored())
        }
        adapters = try scenario.adapters.map(SimulatedAdapter.init)
        devices = [:]
        deviceOrder = []
        let adapterNames = Dictionary(uniqueKeysWithValues: adapters.map { ($0.spec.name, $0) })
        for spec in scenario.devices + addedSpecs where !removedAddresses.contains(spec.address.description) {
            guard let adapter = adapterNames[spec.adapter] else { continue }
            let device = try SimulatedDevice(spec: spec, adapter: adapter, seed: scenario.seed)
            devices[device.path] = device
            deviceOrder.append(device.path)
            armRotation(spec)
        }
        try exportBaseObjects()
        for entry in stored {
            guard let device = devices[entry.path], device.adapter.present else { continue }
            device.temporary = false
            device.paired = entry.paired
            device.cache = entry.cache
            device.export(in: self)
        }
        let changes = try await connection.nameOwnerChanges()
        let generation = self.generation
        clientWatch = Task { [weak self] in
            for await change in changes where change.isClientLeaving {
                await self?.clientLeft(change.name, generation: generation)
            }
        }
        let reply = try await connection.requestName("org.bluez")
        guard reply == .primaryOwner || reply == .alreadyOwner else {
            await connection.close()
            throw DBusError(.failed, "org.bluez is owned by another connection (RequestName replied \(reply))")
        }
        // bluetoothd removes every advertisement monitor of each controller it takes on.
        resetMonitors()
        managementStateChanged()
        log?(
            "simulator: owns org.bluez as \(connection.uniqueName) with \(adapters.count) adapter(s), \(devices.count) device(s)"
        )
    }

    /// ObjectManager at `/`, `/org/bluez` (AgentManager1, ProfileManager1), the adapters and the control object.
    private func exportBaseObjects() throws {
        guard let connection else { return }
        var objects: [(DBusObjectPath, [DBusInterface], Bool)] = [
            ("/org/bluez", agentManagerInterfaces(), false), (Self.controlPath, [controlInterfaceDefinition()], false),
        ]
        for adapter in adapters where adapter.present {
            objects.append((adapter.path, adapterInterfaces(adapter), true))
        }
        try connection.assumeIsolated { connection in
            connection.addObjectManager(at: .root)
            for (path, interfaces, announce) in objects {
                try connection.export(interfaces, at: path, announce: announce)
            }
        }
    }

    private func scheduleEvents() {
        for event in scenario.events {
            let token = after(event.at) {
                switch event.action {
                case .power(let name, let on):
                    self.adapter(named: name)?.setPowered(on, in: self)
                case .crash(let restartAfter):
                    self.crashNow(restartAfter: restartAfter)
                }
            }
            eventTimers.append(token)
        }
    }

    /// Stops like bluetoothd on SIGTERM: adapters power off (links drop, discovery ends), then
    /// the name is released and the connection closed.
    public func stop() async {
        for adapter in adapters where adapter.powered { adapter.setPowered(false, in: self) }
        flushSignals()
        guard let connection else { return }
        _ = try? await connection.releaseName("org.bluez")
        try? await connection.flush()
        tearDown()
        closeManagementSocket()
    }

    /// The daemon dies like a crash: the connection closes, `org.bluez` loses its owner, no
    /// `InterfacesRemoved` is sent, acquired sockets hang up. With `restartAfter` a fresh
    /// daemon (new unique name, fresh object tree) takes the name again after that many seconds.
    public func crash(restartAfter: Double? = nil) {
        crashNow(restartAfter: restartAfter)
    }

    /// Comes back after a crash (or a ``stop()``) with a fresh object tree: the scenario's
    /// adapters, the devices bluetoothd had stored (no longer temporary: connected with a public
    /// or static address, or paired), disconnected; other devices appear again when discovered.
    public func restart() async throws {
        guard connection == nil else { return }
        try await bringUp()
    }

    func crashNow(restartAfter: Double?) {
        log?("simulator: crash" + (restartAfter.map { ", restart in \($0) s" } ?? ""))
        tearDown()
        if let restartAfter {
            _ = loop.addTimer(after: restartAfter) { [self] in
                Task {
                    do {
                        try await self.restart()
                    } catch {
                        self.log?("simulator: restart failed: \(error)")
                    }
                }
            }
        }
    }

    private func tearDown() {
        generation += 1
        clientWatch?.cancel()
        clientWatch = nil
        if let scheduleTimer { loop.cancelTimer(scheduleTimer) }
        scheduleTimer = nil
        schedule.removeAll()
        for device in devices.values {
            for characteristic in device.characteristics { characteristic.release(emit: false, in: self) }
        }
        pendingSignals.removeAll()
        bursts.removeAll()
        agents.removeAll()
        agentOrder.removeAll()
        for watch in ownerWatches.values { watch.task.cancel() }
        ownerWatches.removeAll()
        for adapter in adapters { adapter.advertising.tearDown(in: self) }
        if let connection {
            connection.assumeIsolated { $0.close() }
        }
        connection = nil
        // The kernel stops the scan of a daemon that died.
        managementStateChanged()
    }

    // MARK: Loop helpers

    /// Runs `body` after `seconds` on the loop, unless the simulator crashed or stopped meanwhile.
    @discardableResult
    /// `body` is isolated to the simulator (formed in its isolation), so it may capture the
    /// objects of the world.
    func after(_ seconds: Double, _ body: @escaping () -> Void) -> EventLoop.Token {
        let generation = self.generation
        return loop.addTimer(after: max(0, seconds)) {
            guard self.generation == generation else { return }
            body()
        }
    }

    func cancel(_ token: EventLoop.Token?) {
        if let token { loop.cancelTimer(token) }
    }

    /// Runs `body` with the connection (nothing when crashed); bus errors are logged.
    func withBus(_ body: (isolated DBusConnection) throws -> Void) {
        guard let connection else { return }
        do { try connection.assumeIsolated(body) } catch { log?("simulator: \(error)") }
    }

    /// Exported property value now.
    func current(_ name: String, _ interface: String, at path: DBusObjectPath) -> DBusValue? {
        guard let connection else { return nil }
        return connection.assumeIsolated { $0.property(name, interface: interface, at: path) }
    }

    // MARK: Coalesced PropertiesChanged

    /// Sets properties now (so `Get` sees them) and queues their `PropertiesChanged` for the end
    /// of this loop turn, merged with other changes of the same object and interface. A nil
    /// value removes the property; it is then announced in `invalidated_properties`.
    func change(_ changes: [(String, DBusValue?)], interface: String, at path: DBusObjectPath) {
        guard connection != nil, !changes.isEmpty else { return }
        withBus { connection in
            for (name, value) in changes {
                try connection.setProperty(name, to: value, interface: interface, at: path, emit: false)
            }
        }
        if let index = pendingSignals.firstIndex(where: { $0.path == path && $0.interface == interface }) {
            for (name, _) in changes where !pendingSignals[index].names.contains(name) {
                pendingSignals[index].names.append(name)
            }
        } else {
            pendingSignals.append((path, interface, changes.map(\.0)))
        }
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.execute { [self] in self.assumeIsolated { $0.flushSignals() } }
    }

    /// Emits the queued `PropertiesChanged` signals with the values as they are now.
    func flushSignals() {
        flushScheduled = false
        let pending = pendingSignals
        pendingSignals.removeAll()
        guard let connection, !pending.isEmpty else { return }
        connection.assumeIsolated { connection in
            for entry in pending {
                var changed: [DBusDictionaryEntry] = []
                var invalidated: [DBusValue] = []
                for name in entry.names {
                    if let value = connection.property(name, interface: entry.interface, at: entry.path) {
                        changed.append(DBusDictionaryEntry(.string(name), .variant(value)))
                    } else {
                        invalidated.append(.string(name))
                    }
                }
                try? connection.emit(
                    path: entry.path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                    arguments: [
                        .string(entry.interface), .dictionary(key: .string, value: .variant, changed),
                        .array(.string, invalidated),
                    ])
            }
        }
    }

    /// Drops queued signals of objects at or below `path` (they are being removed).
    func forgetSignals(under path: DBusObjectPath) {
        pendingSignals.removeAll { $0.path.isDescendant(of: path) }
    }

    // MARK: Finding objects

    func adapter(named name: String) -> SimulatedAdapter? {
        adapters.first { $0.spec.name == name }
    }

    /// The device at `path` with `Device1` on the bus (UnknownObject otherwise, as from the bus).
    func exportedDevice(_ path: DBusObjectPath) throws -> SimulatedDevice {
        guard let device = devices[path], device.exported else {
            throw DBusError(.unknownObject, "No such object path '\(path)'")
        }
        return device
    }

    /// The characteristic at `path` of the device at `devicePath` (UnknownObject otherwise).
    func characteristic(_ path: DBusObjectPath, of devicePath: DBusObjectPath) throws -> (
        SimulatedDevice, SimulatedCharacteristic
    ) {
        guard let device = devices[devicePath], let characteristic = device.characteristic(at: path) else {
            throw DBusError(.unknownObject, "No such object path '\(path)'")
        }
        return (device, characteristic)
    }

    // MARK: Objects leaving the bus

    /// Unexports the objects below `path` (InterfacesRemoved, children first) and, with
    /// `including`, `path` itself; their queued signals are dropped.
    func unexport(under path: DBusObjectPath, including: Bool) {
        forgetSignals(under: path)
        withBus { connection in
            for objectPath in connection.exportedPaths.reversed()
            where objectPath != path && objectPath.isDescendant(of: path) {
                try connection.unexport(at: objectPath)
            }
            if including { try connection.unexport(at: path) }
        }
    }

    // MARK: What the peripherals received

    /// A simulated peripheral received a write: counted and recorded (``recordedWrites``).
    func record(
        _ value: [UInt8], offset: UInt16, type: String, uuid: BluetoothUUID, path: DBusObjectPath,
        of device: SimulatedDevice
    ) {
        counters.writes += 1
        writes.append(
            RecordedWrite(
                adapter: device.adapter.spec.name, device: device.spec.address, uuid: uuid, path: path.rawValue,
                value: value, offset: offset, type: type, time: elapsed))
    }

    // MARK: Clients leaving the bus

    func clientLeft(_ client: String, generation: Int) {
        guard generation == self.generation else { return }
        agents.removeValue(forKey: client)
        agentOrder.removeAll { $0 == client }
        peripheralClientLeft(client)
        for adapter in adapters { adapter.clientLeft(client, in: self) }
        for path in deviceOrder { devices[path]?.clientLeft(client, in: self) }
    }
}
