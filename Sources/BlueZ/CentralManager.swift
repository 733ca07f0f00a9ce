import Bluetooth
import DBus
import EventLoop
import FIFOQueue

/// The BLE central (Core Bluetooth's `CBCentralManager`) over BlueZ's D-Bus API.
///
/// Threading: an actor whose executor is the ``EventLoop`` thread that also runs its one
/// long-lived ``DBusConnection``; every method may be called from any task. Results, streams and
/// values handed out are `Sendable` snapshots.
///
/// What it does on the bus (docs/bluez.md §6): one `GetManagedObjects` at start and after each
/// bluetoothd restart, then only the signals of `org.bluez` (`InterfacesAdded`/`InterfacesRemoved`
/// from `/`, `PropertiesChanged` from `/org/bluez/…`, through one handler so their order is
/// kept; which of them the bus sends depends on where the reports come from, ``reports``:
/// BlueZMatchRules.swift) — never polling. GATT operations are serialised per device (BlueZ
/// answers `InProgress` to concurrent ones).
///
/// Recovery: when bluetoothd leaves the bus the state goes `.resetting`; when it returns the
/// objects are re-read, discovery re-armed, wanted connections re-established and notification
/// subscriptions renewed. An adapter power cycle does the same. Connections already up in
/// BlueZ at start are adopted. With ``CentralOptions/stateFilePath`` wanted connections and
/// subscriptions are saved and restored after a restart of the process.
///
/// Lifetime: ``start(options:bus:on:)`` creates it; ``close()`` ends every stream, stops
/// discovery and closes the connection (connections to peripherals stay up in BlueZ, as BlueZ
/// keeps them — call ``disconnect(_:)`` first to drop them).
public actor CentralManager: BlueZManager {
    /// The loop whose thread runs this actor and its D-Bus connection.
    public nonisolated let loop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    /// The options the manager was started with.
    public nonisolated let options: CentralOptions

    let connection: DBusConnection
    var tree = BlueZObjectTree()
    var adapterPath: DBusObjectPath? {
        didSet { adapterIndex = adapterPath.flatMap { Self.controllerIndex(of: $0) } }
    }
    /// The management interface's index of the adapter (`hciN` is N), for kernel reports.
    var adapterIndex: UInt16?
    /// Where scans get their reports now (``setReportSource(_:)``).
    public internal(set) var reports: CentralOptions.ReportSource
    /// Names the kernel's reports carried, by address, for its reports without one (a name
    /// sent only in some reports), else BlueZ's name of the device, empty when it has none;
    /// bounded (``kernelNamesLimit``).
    var kernelNames: [BluetoothAddress: String] = [:]
    var bluezOwner: String?
    /// The current state; see ``stateUpdates()`` for changes.
    public internal(set) var state: CentralState = .unknown
    var closed = false
    var nextID = 0
    var signalTasks: [Task<Void, Never>] = []
    /// bluetoothd's signals, handled as they are dispatched.
    var bluezSignals: DBusSignalHandler?
    /// Which of them the bus sends (BlueZMatchRules.swift).
    var matchRules = BlueZMatchRules()
    /// `Device1` property changes handled since the start (signals, not refreshes): for tests of
    /// what the bus sends on each path.
    package private(set) var deviceSignalsHandled = 0
    /// Where state changes go: ``stateUpdates()`` streams and ``stateUpdates(handler:)`` handlers.
    var stateContinuations: [Int: EventSink<CentralState>] = [:]
    /// The adapter's condition as last told (``conditionUpdates(handler:)``).
    public private(set) var condition: AdapterCondition = .unknown
    var conditionHandlers: [Int: EventSink<AdapterCondition>] = [:]
    /// The next try while the bus refuses access to `org.bluez` (``CentralOptions/accessRetryInterval``).
    var accessRetryTimer: EventLoop.Token?
    /// Where connection events go: streams (``connectionEvents()``) and handlers
    /// (``connectionEvents(handler:)``).
    var connectionContinuations: [Int: EventSink<ConnectionEvent>] = [:]
    var waiters: [Int: Waiter] = [:]
    /// Scanning.
    var scans: [Int: ScanSubscription] = [:]
    var discovery = DiscoveryState()
    /// The management socket whose advertisement monitor serves passive scans (``setReportSource(_:radio:)``).
    var passiveScanner: KernelRadio?
    /// Devices a connection waits for that bluetoothd does not know, with how many attempts wait
    /// for each: on the kernel's path with every scan passive, bluetoothd discovers nothing, so
    /// its discovery runs while one waits (``establish(_:timeout:)``).
    var learning: [BluetoothAddress: Int] = [:]
    /// The controller whose passive scan this manager asked `passiveScanner` for (and has not
    /// released), nil when none.
    var passiveScannerHeld: UInt16?
    /// Connections this manager wants up (connect with auto-reconnect, restored, or adopted).
    var links: [BluetoothAddress: Link] = [:]
    /// Addresses whose disconnect this manager asked for (the next `Connected=false` is expected).
    var disconnectsRequested: Set<BluetoothAddress> = []
    /// Devices whose `ServicesResolved=true` waits for their GATT objects (CentralManager+Resolution).
    var pendingResolutions: [DBusObjectPath: Int] = [:]
    /// Notification subscriptions by characteristic, and their current object paths.
    var subscriptions: [Characteristic: NotifySubscription] = [:]
    var subscriptionPaths: [DBusObjectPath: Characteristic] = [:]
    /// Reads in flight per characteristic path: `Value` signals held back meanwhile.
    var heldValues: [DBusObjectPath: [[UInt8]]] = [:]
    /// Bytes of a finished read whose `Value` signal has not been seen yet (dropped once, briefly).
    var expectedEchoes: [DBusObjectPath: (bytes: [UInt8], at: UInt64)] = [:]
    /// Devices with a GATT operation running, and the operations waiting for them.
    var busyDevices: Set<BluetoothAddress> = []
    var deviceQueues: [BluetoothAddress: FIFO<CheckedContinuation<Void, Never>>] = [:]
    /// Subscriptions from the state file not yet claimed by ``notifications(for:)``.
    public internal(set) var restoredSubscriptions: [Characteristic] = []
    /// Devices named in the state file (connected or subscribed before the restart).
    public internal(set) var restoredPeripherals: [Peripheral] = []
    /// Restored peripherals the app keeps though it has not connected them yet
    /// (``keepRestored(peripherals:where:)``): still in the state file.
    var heldRestoredPeripherals: Set<BluetoothAddress> = []
    /// The state file is left as ``keepStateForRestart()`` wrote it.
    var stateFrozen = false
    /// The state file as last written or read.
    var lastSavedState: CentralStateFile?
    /// The last error writing the state file (nil after a successful write).
    public internal(set) var stateFileError: CentralError?
    /// The latest ``ping(timeout:)`` round trip (``lastRoundTrip``).
    nonisolated let roundTrips = RoundTripRecord()
    /// The pairing agent (CentralManager+Agent.swift).
    var agent = PairingAgentState()

    init(connection: DBusConnection, options: CentralOptions) {
        self.connection = connection
        self.loop = connection.loop
        self.options = options
        self.reports = options.reports
    }

    /// Connects to the bus, reads BlueZ's objects, adopts existing connections and restores the
    /// state file; returns once ``state`` is known (any state: check it or wait with
    /// ``waitUntilPoweredOn(timeout:)``).
    ///
    /// - Throws: ``CentralError`` ``CentralError/Code/bluezUnavailable`` only when the bus itself
    ///   cannot be reached; a missing bluetoothd or adapter is a state (`.unsupported`), not an error.
    public static func start(
        options: CentralOptions = CentralOptions(), bus: DBusConnection.Bus = .system, on loop: EventLoop
    ) async throws -> CentralManager {
        try await start(bus: bus, on: loop) { CentralManager(connection: $0, options: options) }
    }

    func subscribe() async throws {
        // One handler for every signal of bluetoothd (InterfacesAdded/Removed from `/`,
        // PropertiesChanged from `/org/bluez/…` — it emits nothing else we could receive), so they
        // are handled in the order BlueZ sent them (which is not always the order it meant: a
        // ServicesResolved may overtake the GATT objects it announces, see
        // CentralManager+Resolution.swift). Which of them the bus sends is chosen apart
        // (BlueZMatchRules.swift): all on the D-Bus path, on the kernel's only those the central
        // needs besides the advertisement reports.
        // Handled on the loop as they are dispatched, in order with the replies to our calls (a
        // task iterating a stream could run after a later reply: on a loaded machine the `Value`
        // signal of our own ReadValue then came after the read had finished and went out as a
        // notification).
        // The bus's rules say which signals come (BlueZMatchRules: per path, and with
        // ``CentralOptions/adapterSignalsOnly`` only the object manager's and the own adapter's
        // on the D-Bus path); one local handler takes them all, in the order bluetoothd sent them.
        bluezSignals = try await connection.handleSignals(matching: BlueZMatchRules.everything, onBus: false) {
            [weak self] message in
            self?.assumeLoopIsolated { $0.handleSignal(message) }
        }
        await updateMatchRules()
        if let error = matchRules.lastError { throw error }
        loadStateFile()
    }

    /// While the bus refuses access, the manager tries again now and then.
    func accessRefused() { scheduleAccessRetry() }

    /// While the bus refuses access to `org.bluez`, tries again every
    /// ``CentralOptions/accessRetryInterval``: a policy installed meanwhile (dbus-daemon reloads
    /// its configuration when a file in /etc/dbus-1/system.d changes) lets the manager in
    /// without a restart. No signal says that access was granted, so this is the one poll.
    func scheduleAccessRetry() {
        guard accessRetryTimer == nil, !closed else { return }
        accessRetryTimer = loop.addTimer(after: options.accessRetryInterval) { [weak self] in
            self?.assumeIsolated { central in
                central.accessRetryTimer = nil
                guard central.state == .unauthorized, !central.closed else { return }
                Task { await central.retryAccess() }
            }
        }
    }

    private func retryAccess() async {
        guard state == .unauthorized, !closed else { return }
        let owner: String?
        do {
            owner = try await connection.nameOwner("org.bluez")
        } catch {
            return scheduleAccessRetry()
        }
        if owner != nil, owner == bluezOwner {
            await reload()
        } else if owner == nil, bluezOwner == nil {
            setState(.unsupported)  // bluetoothd left meanwhile: its return is signalled
        } else {
            await bluezOwnerChanged(to: owner)
        }
    }

    /// Ends every stream (scans and notifications finish, waiting operations fail with
    /// ``CentralError/Code/cancelled``), stops this manager's discovery session and closes the
    /// D-Bus connection. Links to peripherals stay up in BlueZ.
    ///
    /// The state file keeps the connections and subscriptions the app has at the close; what
    /// was restored from it at the start and not taken up since (``restoredSubscriptions``) is
    /// left out: a run that ends cleanly without wanting it leaves it nothing to restore. After
    /// ``keepStateForRestart()`` the file stays as that wrote it. (A process that dies without
    /// closing leaves the file as it last wrote it.)
    public func close() async {
        guard !closed else { return }
        if !stateFrozen {
            restoredSubscriptions.removeAll()
            heldRestoredPeripherals.removeAll()
            forgetUnusedRestoredPeripherals()
            saveState()
        }
        closed = true
        for case .stream(let stream) in scans.values.map(\.sink) { stream.continuation.finish() }
        scans.removeAll()
        if discovery.sessionActive, let adapterPath {
            _ = try? await callBlueZ(adapterPath, BlueZObjectTree.adapter, "StopDiscovery", timeout: .seconds(2))
        }
        await releasePassiveScan()
        for link in links.values { if let timer = link.retryTimer { loop.cancelTimer(timer) } }
        links.removeAll()
        for (_, subscription) in subscriptions { subscription.finish(throwing: nil) }
        subscriptions.removeAll()
        failAllWaiters(closedError("wait"))
        for case .stream(let continuation) in connectionContinuations.values { continuation.finish() }
        connectionContinuations.removeAll()
        if let timer = discovery.retryTimer { loop.cancelTimer(timer) }
        if let timer = accessRetryTimer { loop.cancelTimer(timer) }
        accessRetryTimer = nil
        conditionHandlers.removeAll()
        bluezSignals?.cancel()
        await closeConnection()
    }

    // MARK: State

    /// The state now, then every change, as an `AsyncStream`.
    ///
    /// Buffering: newest 16 states; a consumer that falls behind skips intermediate ones but
    /// always sees the latest. Finishes when the manager is closed.
    public func stateUpdates() -> AsyncStream<CentralState> { stateStream() }

    /// The state now, then every change, handed to `handler` on the loop thread as it happens
    /// (no stream, no task; the first call before this returns). Lasts until
    /// ``stopStateUpdates(_:)`` or ``close()``.
    public func stateUpdates(handler: @escaping @Sendable (CentralState) -> Void) -> StateUpdatesToken {
        StateUpdatesToken(id: addStateHandler(handler))
    }

    /// Ends a ``stateUpdates(handler:)`` registration.
    public func stopStateUpdates(_ token: StateUpdatesToken) {
        stateContinuations.removeValue(forKey: token.id)
    }

    /// The adapter's ``condition`` now, then every change, handed to `handler` on the loop
    /// thread as it happens (the first call before this returns). Finer than the state: a
    /// powered-off adapter that becomes rfkill-blocked is a change here, not of ``state``.
    /// Lasts until ``stopConditionUpdates(_:)`` or ``close()``.
    public func conditionUpdates(handler: @escaping @Sendable (AdapterCondition) -> Void) -> StateUpdatesToken {
        handler(condition)
        return StateUpdatesToken(id: conditionHandlers.addHandler(handler, id: makeID(), unlessClosed: closed))
    }

    /// Ends a ``conditionUpdates(handler:)`` registration.
    public func stopConditionUpdates(_ token: StateUpdatesToken) {
        conditionHandlers.removeValue(forKey: token.id)
    }

    /// The adapter's name (`hci0`), or the selector's description while no adapter is chosen.
    public var adapterName: String { BlueZPresence.adapterName(adapterPath, selector: options.adapter) }

    /// Waits until ``state`` is `.poweredOn`.
    /// - Throws: ``CentralError`` with the state's meaning after `timeout` — ``CentralError/Code/poweredOff``,
    ///   ``CentralError/Code/unauthorized``, ``CentralError/Code/bluezUnavailable`` — and what to do;
    ///   ``CentralError/Code/cancelled`` when the manager is closed meanwhile or the task is cancelled.
    public func waitUntilPoweredOn(timeout: Duration = .seconds(10)) async throws {
        try await waitForPowerOn(timeout: timeout)
    }

    func setState(_ newState: CentralState) {
        // The condition may change without the state (PowerState, or bluetoothd's presence).
        defer { reportCondition() }
        guard let old = changeState(to: newState) else { return }
        if newState == .poweredOn {
            poweredOn()
        } else if old == .poweredOn {
            discovery.sessionActive = false
            discovery.filterSent = nil
            setEffectiveScanMode(nil)
        }
        evaluateWaiters()
    }

    /// Tells the condition handlers when ``condition`` changed.
    private func reportCondition() {
        let powerState = adapterPath.flatMap { tree.properties($0, BlueZObjectTree.adapter)?["PowerState"]?.string }
        let new = AdapterCondition.of(state, bluezPresent: bluezOwner != nil, powerState: powerState)
        guard new != condition else { return }
        condition = new
        for sink in conditionHandlers.values { sink.deliver(new) }
    }

    /// The chosen adapter's object path (`/org/bluez/hci0`), nil while none is chosen.
    public var adapterObjectPath: String? { adapterPath?.rawValue }

    /// The adapter's address, when one is chosen.
    public var adapterAddress: BluetoothAddress? { chosenAdapterAddress }

    /// The adapters bluetoothd has now (`hci0`…) and whether each is powered, for saying which
    /// there are when none matches ``CentralOptions/adapter``.
    public var adapters: [(name: String, powered: Bool)] {
        tree.paths(with: BlueZObjectTree.adapter).map { path in
            (
                BlueZPresence.adapterName(path, selector: options.adapter),
                tree.properties(path, BlueZObjectTree.adapter)?["Powered"]?.bool == true
            )
        }
    }

    /// Number of BlueZ objects tracked (adapters, devices, GATT objects); bounded by what BlueZ exports.
    public var trackedObjectCount: Int { tree.count }

    /// Number of devices of the adapter currently known.
    public var knownDeviceCount: Int {
        guard let adapterPath else { return 0 }
        return tree.deviceCount(below: adapterPath)
    }

    // MARK: bluetoothd presence and the object tree

    /// bluetoothd left the bus: every object is gone (no InterfacesRemoved is sent), so are our
    /// discovery session, notify sessions and acquired sockets.
    func bluezLost() {
        let lostError = CentralError(.bluezUnavailable, operation: "connection", message: "bluetoothd left the bus")
        for path in adapterPath.map({ tree.paths(with: BlueZObjectTree.device, below: $0) }) ?? [] {
            if let device = tree.device(path), device.isConnected, let peripheral = device.peripheral {
                linkWentDown(peripheral, reason: lostError)
            }
        }
        tree.removeAll()
        adapterPath = nil
        discovery.sessionActive = false
        discovery.filterSent = nil
        for subscription in subscriptions.values { subscription.reset() }
        subscriptionPaths.removeAll()
        roundTrips.record(nil)
        agentLost()
        setState(.resetting)
    }

    /// The objects were read (``reload()``): the adapter is picked, connections up are adopted,
    /// the state derived, and subscriptions on devices already connected and resolved renewed.
    func objectsLoaded() {
        if agent.handler != nil, !agent.registered { Task { await self.registerAgent() } }
        forgetVanishedDevices()
        chooseAdapter()
        adoptConnections()
        scheduleMatchRuleUpdate()  // adopted links and the adapter's devices watched again
        updateStateFromAdapter()
        // Subscriptions on devices already connected and resolved are renewed now.
        for path in adapterPath.map({ tree.paths(with: BlueZObjectTree.device, below: $0) }) ?? [] {
            if let device = tree.device(path), device.servicesResolved, let address = device.address {
                servicesResolved(address)
            }
        }
    }

    /// Connections already up in BlueZ are taken over: reported as connected and kept up.
    private func adoptConnections() {
        guard let adapterPath else { return }
        for path in tree.paths(with: BlueZObjectTree.device, below: adapterPath) {
            guard let device = tree.device(path), device.isConnected, let peripheral = device.peripheral else {
                continue
            }
            if links[peripheral.address] == nil { links[peripheral.address] = Link(configuration: options.reconnect) }
            links[peripheral.address]?.connected = true
            links[peripheral.address]?.policy.connected(at: Self.now)
            emit(.connected(peripheral))
        }
    }

    func handleSignal(_ message: DBusMessage) {
        // Only the current owner counts: signals of a daemon that already left are dropped, and
        // a new daemon's objects are read with GetManagedObjects once its NameOwnerChanged is seen.
        guard !closed, message.sender != nil, message.sender == bluezOwner else { return }
        switch (message.interface, message.member) {
        case ("org.freedesktop.DBus.ObjectManager", _) where message.path == .root: handleObjectManager(message)
        case ("org.freedesktop.DBus.Properties", "PropertiesChanged"): handlePropertiesChanged(message)
        default: break
        }
    }

    func handleObjectManager(_ message: DBusMessage) {
        guard message.arguments.count == 2,
            let path = message.arguments[0].objectPath
        else { return }
        switch message.member {
        case "InterfacesAdded":
            let added = tree.add(path, interfaces: message.arguments[1])
            if added.contains(BlueZObjectTree.adapter), adapterPath == nil {
                chooseAdapter()
                updateStateFromAdapter()
            } else if added.contains(BlueZObjectTree.device), isOurDevice(path) {
                deviceAppeared(path)
            }
        case "InterfacesRemoved":
            let names = message.arguments[1].strings ?? []
            if names.contains(BlueZObjectTree.device), isOurDevice(path) {
                deviceRemoved(path)
            }
            tree.remove(path, interfaces: names)
            if path == adapterPath, names.contains(BlueZObjectTree.adapter) {
                adapterPath = nil
                chooseAdapter()
                updateStateFromAdapter()
            }
        default:
            return
        }
        evaluateWaiters()
    }

    func handlePropertiesChanged(_ message: DBusMessage) {
        guard message.arguments.count == 3, let path = message.path,
            let interface = message.arguments[0].string
        else { return }
        let changed = PropertyChanges(message.arguments[1])
        let invalidated = message.arguments[2].strings ?? []
        switch interface {
        case BlueZObjectTree.adapter:
            guard tree.change(path, interface: interface, changed: changed, invalidated: invalidated) else { return }
            if path == adapterPath, changed["Powered"] != nil || changed["PowerState"] != nil {
                updateStateFromAdapter()
            }
        case BlueZObjectTree.device:
            deviceSignalsHandled &+= 1
            guard deviceChanged(path, changed: changed, invalidated: invalidated) else { return }
        case BlueZObjectTree.characteristic:
            tree.change(path, interface: interface, changed: changed, invalidated: invalidated)
            if let value = changed["Value"]?.bytes { valueChanged(path, value) }
        default:
            tree.change(path, interface: interface, changed: changed, invalidated: invalidated)
        }
        evaluateWaiters()
    }

    /// A `PropertiesChanged` of `Device1` (or a refresh read as one: BlueZMatchRules.swift);
    /// `advertised` false keeps a refresh's advertisement properties from being reported to scans.
    /// False when the device is unknown or not the adapter's.
    @discardableResult
    func deviceChanged(
        _ path: DBusObjectPath, changed: PropertyChanges, invalidated: [String], advertised: Bool = true
    ) -> Bool {
        var changed = changed
        let key = tree.devices.key(path)  // once for the lookups below
        // (No DeviceObject is held over the change below: it would make the change copy it.)
        let (wasConnected, wasResolved) =
            tree.device(key).map { ($0.isConnected, $0.servicesResolved) } ?? (false, false)
        // Each looked up once (an advertisement report carries neither).
        let servicesResolved = changed["ServicesResolved"]?.bool
        let connectedValue = changed["Connected"]
        var connected = connectedValue?.bool
        // bluetoothd 5.66 sometimes never signals Connected=true: when the ATT socket comes up
        // before the kernel's Device Connected event it logs "Device … is already connected"
        // and skips the signal (seen in the real-BlueZ VM). ServicesResolved=true implies it.
        if servicesResolved == true, !wasConnected, connectedValue == nil {
            changed["Connected"] = .boolean(true)
            connected = true
        }
        // The GATT objects a ServicesResolved=true announces may still be on their way: it is
        // applied once they are known (CentralManager+Resolution.swift).
        let resolving = servicesResolved == true && !wasResolved && isOurDevice(path)
        if resolving { changed.removeValue(forKey: "ServicesResolved") }
        if servicesResolved == false || connected == false { cancelServicesResolved(path) }
        guard tree.changeDevice(key, changed: changed, invalidated: invalidated), isOurDevice(path) else {
            return false
        }
        if let connected, connected != wasConnected, let peripheral = peripheral(at: path) {
            if connected { linkCameUp(peripheral) } else { linkWentDown(peripheral, reason: nil) }
        }
        if resolving { confirmServicesResolved(path) }
        if advertised, changed.contains(anyOf: Self.advertisementKeys) {
            deviceAdvertised(path, key: key)
        }
        return true
    }

    static let advertisementKeys = ["RSSI", "ManufacturerData", "ServiceData", "Name", "UUIDs", "TxPower"]

    // MARK: Paths and snapshots

    func isOurDevice(_ path: DBusObjectPath) -> Bool {
        guard let adapterPath else { return false }
        return path.isChild(of: adapterPath)
    }

    func devicePath(_ address: BluetoothAddress) -> DBusObjectPath? {
        guard let adapterPath else { return nil }
        return try? adapterPath.appending(address.bluezPathComponent)
    }

    func address(ofDevicePath path: DBusObjectPath) -> BluetoothAddress? {
        tree.device(path)?.address
    }

    func peripheral(at path: DBusObjectPath) -> Peripheral? {
        tree.device(path)?.peripheral
    }

    /// BlueZ has a device object for `address` now (it was seen by a scan, or is paired or
    /// connected).
    public func isKnown(_ address: BluetoothAddress) -> Bool {
        devicePath(address).flatMap { tree.device($0) } != nil
    }

    /// The current snapshot of a peripheral, or a bare one when BlueZ does not know it (now).
    public func peripheral(_ address: BluetoothAddress) -> Peripheral {
        devicePath(address).flatMap { peripheral(at: $0) } ?? Peripheral(address: address)
    }

    /// Peripherals whose link is up, optionally only those offering one of `services`
    /// (`retrieveConnectedPeripherals(withServices:)`).
    public func connectedPeripherals(withServices services: [BluetoothUUID]? = nil) -> [Peripheral] {
        guard let adapterPath else { return [] }
        return tree.paths(with: BlueZObjectTree.device, below: adapterPath).compactMap { path in
            guard let device = tree.device(path), device.isConnected else { return nil }
            if let services {
                let offered = Set(device.serviceUUIDs)
                guard services.contains(where: offered.contains) else { return nil }
            }
            return device.peripheral
        }
    }

    static var now: Double { Double(EventLoop.now()) / 1e9 }
}

// MARK: The life cycle both managers share

extension CentralManager {
    typealias FailureCode = CentralErrorCode
    static let role = "central"
    nonisolated var adapterSelector: AdapterSelector { options.adapter }
    nonisolated var callTimeout: Duration { options.gattTimeout }
}
