import Bluetooth
import DBus
import EventLoop
import FIFOQueue

/// The state of a ``PeripheralManager``: the same states, derived the same way, as the
/// central's (Core Bluetooth's `CBManagerState` is shared by both managers too).
public typealias PeripheralState = CentralState

/// The BLE peripheral role (Core Bluetooth's `CBPeripheralManager`) over BlueZ's D-Bus API:
/// publish GATT services, answer reads and writes, notify subscribed centrals, advertise.
///
/// Threading: an actor whose executor is the ``EventLoop`` thread that also runs its one
/// long-lived ``DBusConnection`` (like ``CentralManager``); every method may be called from any task.
///
/// What it does on the bus (docs/bluez.md §5): the services are exported as a GATT application
/// (an ObjectManager at `<objectPath>/app` with `GattService1`/`GattCharacteristic1`/
/// `GattDescriptor1` objects) and registered with `org.bluez.GattManager1.RegisterApplication`;
/// bluetoothd calls `GetManagedObjects` back before it replies, which the connection serves while
/// the call is pending (nothing blocks the loop). bluetoothd then calls `ReadValue`, `WriteValue`,
/// `StartNotify`, `StopNotify` and `Confirm` on those objects; they arrive as ``events(bufferingNewest:)``
/// (or, on the loop thread with no stream or task, at ``events(handler:)``).
/// Notifications are `PropertiesChanged(Value)` on the characteristic, which bluetoothd sends to
/// every subscribed central. Only calls from the current owner of `org.bluez` are served.
///
/// Recovery: when bluetoothd leaves the bus the state goes `.resetting`; when it returns, or
/// after an adapter power cycle, the application and the advertisement are registered again
/// (``PeripheralEvent/servicesRegistered(_:)`` and ``PeripheralEvent/advertisingStarted`` report it).
///
/// Lifetime: ``start(options:bus:on:)`` creates it; ``close()`` unregisters everything, ends the
/// event and state streams and closes the connection.
public actor PeripheralManager: BlueZManager {
    /// The loop whose thread runs this actor and its D-Bus connection.
    public nonisolated let loop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    /// The options the manager was started with.
    public nonisolated let options: PeripheralOptions

    let connection: DBusConnection
    /// The unique bus name of the manager's connection (e.g. `:1.42`): the owner bluetoothd
    /// sees for the application and the advertisement.
    public nonisolated var uniqueBusName: String { connection.uniqueName }
    var tree = BlueZObjectTree()
    var adapterPath: DBusObjectPath?
    var bluezOwner: String?
    /// The current state; see ``stateUpdates()`` for changes.
    public internal(set) var state: PeripheralState = .unknown
    var closed = false
    var nextID = 0
    var signalTasks: [Task<Void, Never>] = []
    /// Where state changes and events go: streams, or handlers called on the loop thread.
    var stateContinuations: [Int: EventSink<PeripheralState>] = [:]
    var eventContinuations: [Int: EventSink<PeripheralEvent>] = [:]

    /// Published services in the order they were added, and the per-attribute state.
    var localServices: [LocalService] = []
    var characteristicRecords: [DBusObjectPath: CharacteristicRecord] = [:]
    var descriptorRecords: [DBusObjectPath: DescriptorRecord] = [:]
    var nextServiceIndex = 0
    /// Whether BlueZ currently has our application / advertisement (on ``registeredAdapter``).
    var applicationRegistered = false
    var advertisementRegistered = false
    /// A re-registration after a central's disconnection is scheduled (``centralDisconnected()``).
    var readvertisePending = false
    var registeredAdapter: DBusObjectPath?
    /// The advertisement wanted (nil: not advertising), and whether its object is exported.
    public internal(set) var advertisement: Advertisement?
    var advertisementExported = false
    /// ``advertisement`` was kept while the adapter could not be used and is fitted (legacy or
    /// extended, ``fitted(_:operation:)``) only when it is registered.
    var advertisementUnfitted = false
    /// Registration calls run one at a time.
    var operationRunning = false
    var operationWaiters = FIFO<CheckedContinuation<Void, Never>>()

    struct CharacteristicRecord {
        var local: LocalCharacteristic
        /// The cached value reads are answered from; nil: reads go to the app.
        var cachedValue: [UInt8]?
        /// bluetoothd called StartNotify (and not StopNotify since).
        var notifying = false
    }

    struct DescriptorRecord {
        var local: LocalDescriptor
        var value: [UInt8]?
    }

    init(connection: DBusConnection, options: PeripheralOptions) {
        self.connection = connection
        self.loop = connection.loop
        self.options = options
    }

    var applicationRoot: DBusObjectPath { (try? options.objectPath.appending("app")) ?? options.objectPath }
    var advertisementPath: DBusObjectPath {
        (try? options.objectPath.appending("advertisement0")) ?? options.objectPath
    }

    /// Connects to the bus, reads BlueZ's adapters and returns once ``state`` is known (any
    /// state: check it or wait with ``waitUntilPoweredOn(timeout:)``).
    ///
    /// - Throws: ``PeripheralError`` ``PeripheralError/Code/bluezUnavailable`` only when the bus
    ///   itself cannot be reached; a missing bluetoothd or adapter is a state (`.unsupported`).
    public static func start(
        options: PeripheralOptions = PeripheralOptions(), bus: DBusConnection.Bus = .system, on loop: EventLoop
    ) async throws -> PeripheralManager {
        try await start(bus: bus, on: loop) { PeripheralManager(connection: $0, options: options) }
    }

    func subscribe() async throws {
        await connection.addObjectManager(at: applicationRoot)
        let bluez = try await connection.signals(matching: DBusMatchRule(sender: "org.bluez"))
        signalTasks.append(
            Task { [weak self] in
                for await message in bluez { await self?.handleSignal(message) }
            })
    }

    /// The bus refused access: the manager stays `.unauthorized` until `org.bluez` has a new owner.
    func accessRefused() {}

    /// Stops advertising, unregisters the application (best effort, 2 s each), ends every stream
    /// and closes the D-Bus connection. Requests not answered yet fail.
    public func close() async {
        guard !closed else { return }
        closed = true
        if let adapter = registeredAdapter, bluezOwner != nil {
            if advertisementRegistered { await unregisterAdvertisement(from: adapter, timeout: .seconds(2)) }
            if applicationRegistered {
                _ = try? await callBlueZ(
                    adapter, Self.gattManager, "UnregisterApplication", [.objectPath(applicationRoot)],
                    timeout: .seconds(2))
            }
        }
        advertisementRegistered = false
        applicationRegistered = false
        for case .stream(let continuation) in eventContinuations.values { continuation.finish() }
        eventContinuations.removeAll()
        for waiter in operationWaiters { waiter.resume() }
        operationWaiters.removeAll()
        await closeConnection()
    }

    // MARK: State and events

    /// The state now, then every change (newest 16 buffered), like ``CentralManager/stateUpdates()``.
    public func stateUpdates() -> AsyncStream<PeripheralState> { stateStream() }

    /// The state now, then every change, handed to `handler` on the loop thread as it happens
    /// (no stream, no task; the first call before this returns), like
    /// ``CentralManager/stateUpdates(handler:)``. Lasts until ``stopStateUpdates(_:)`` or ``close()``.
    public func stateUpdates(handler: @escaping @Sendable (PeripheralState) -> Void) -> StateUpdatesToken {
        StateUpdatesToken(id: addStateHandler(handler))
    }

    /// Requests, subscriptions and registration news, from now on (see ``PeripheralEvent``).
    ///
    /// Every stream gets every event; a request answered by one consumer is answered for all
    /// (the first answer wins). While no stream exists, reads of attributes without a cached
    /// value and writes that expect a response are refused with ATT 0x0E (``ATTError/unlikelyError``).
    /// Buffering: the newest `limit` events; a dropped request is answered with an error.
    /// Finishes when the manager is closed.
    public func events(bufferingNewest limit: Int = 1024) -> AsyncStream<PeripheralEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: PeripheralEvent.self, bufferingPolicy: .bufferingNewest(limit))
        guard let id = register(continuation) else { return stream }
        eventContinuations[id] = .stream(continuation)
        continuation.onTermination = unregistering { _ = $0.eventContinuations.removeValue(forKey: id) }
        return stream
    }

    /// The events of ``events(bufferingNewest:)``, handed to `handler` on the loop thread as they
    /// happen, inside the handling of bluetoothd's call (no stream, no task, no buffer). A
    /// request may be answered from inside the handler. Counts as a consumer like a stream (while
    /// one is registered, requests go to the app). Lasts until ``stopEvents(_:)`` or ``close()``.
    public func events(handler: @escaping @Sendable (PeripheralEvent) -> Void) -> PeripheralEventsToken {
        PeripheralEventsToken(id: eventContinuations.addHandler(handler, id: makeID(), unlessClosed: closed))
    }

    /// Ends an ``events(handler:)`` registration.
    public func stopEvents(_ token: PeripheralEventsToken) {
        eventContinuations.removeValue(forKey: token.id)
    }

    /// Ends a ``stateUpdates(handler:)`` registration.
    public func stopStateUpdates(_ token: StateUpdatesToken) {
        stateContinuations.removeValue(forKey: token.id)
    }

    func emit(_ event: PeripheralEvent) {
        for sink in eventContinuations.values { sink.deliver(event) }
    }

    /// Waits until ``state`` is `.poweredOn`.
    /// - Throws: ``PeripheralError`` with the state's meaning after `timeout`, ``PeripheralError/Code/cancelled``
    ///   when the manager is closed meanwhile or the task is cancelled.
    public func waitUntilPoweredOn(timeout: Duration = .seconds(10)) async throws {
        try await waitForPowerOn(timeout: timeout)
    }

    func setState(_ newState: PeripheralState) {
        guard let old = changeState(to: newState) else { return }
        if newState == .poweredOn {
            Task { await self.recover() }
        } else if old == .poweredOn {
            // A power cycle may or may not keep BlueZ's registrations; register again on power-on
            // (AlreadyExists then counts as success).
            applicationRegistered = false
            if advertisementRegistered, advertisement != nil {
                emit(
                    .advertisingStopped(
                        reason: newState == .poweredOff ? "the adapter was powered off" : "bluetoothd is gone"))
            }
            advertisementRegistered = false
            resetSubscriptions()
        }
    }

    /// True when `operation` may register with BlueZ now; false when it is to be kept for the
    /// adapter (``PeripheralOptions/waitingForAdapter``, not powered on); throws otherwise.
    func registersNow(_ operation: String) throws -> Bool {
        if options.waitingForAdapter, !closed, state != .poweredOn { return false }
        try requirePoweredOn(operation)
        return true
    }

    var adapterName: String { BlueZPresence.adapterName(adapterPath, selector: options.adapter) }

    /// The adapter's address (what centrals see when they connect), when one is chosen.
    public var adapterAddress: BluetoothAddress? { chosenAdapterAddress }

    // MARK: bluetoothd presence

    /// bluetoothd left: our application and advertisement registrations went with it.
    func bluezLost() {
        tree.removeAll()
        adapterPath = nil
        setState(.resetting)
        applicationRegistered = false
        advertisementRegistered = false
        registeredAdapter = nil
    }

    /// The objects were read (``reload()``): the adapter is picked and the state derived.
    func objectsLoaded() {
        chooseAdapter()
        updateStateFromAdapter()
    }

    func handleSignal(_ message: DBusMessage) {
        guard !closed, message.sender != nil, message.sender == bluezOwner else { return }
        switch (message.interface, message.member) {
        case ("org.freedesktop.DBus.ObjectManager", "InterfacesAdded") where message.path == .root:
            guard message.arguments.count == 2, let path = message.arguments[0].objectPath else { return }
            if tree.add(path, interfaces: message.arguments[1]).contains(BlueZObjectTree.adapter), adapterPath == nil {
                chooseAdapter()
                updateStateFromAdapter()
            }
        case ("org.freedesktop.DBus.ObjectManager", "InterfacesRemoved") where message.path == .root:
            guard message.arguments.count == 2, let path = message.arguments[0].objectPath else { return }
            let names = message.arguments[1].strings ?? []
            tree.remove(path, interfaces: names)
            if path == adapterPath, names.contains(BlueZObjectTree.adapter) {
                chooseAdapter()
                applicationRegistered = false
                advertisementRegistered = false
                updateStateFromAdapter()
            }
        case ("org.freedesktop.DBus.Properties", "PropertiesChanged"):
            guard message.arguments.count == 3, let path = message.path, let interface = message.arguments[0].string
            else { return }
            if interface == BlueZObjectTree.device {
                // A link of this adapter went down: a central's, or in role both a peripheral's.
                // (Every advertisement's change comes here too: looked up in place, no dictionary.)
                if message.arguments[1]["Connected"]?.bool == false, let adapterPath, path.isDescendant(of: adapterPath)
                {
                    centralDisconnected()
                }
                return
            }
            guard interface == BlueZObjectTree.adapter else { return }
            let changed = message.arguments[1].dictionary ?? [:]
            tree.change(path, interface: interface, changed: changed, invalidated: message.arguments[2].strings ?? [])
            if path == adapterPath, changed["Powered"] != nil { updateStateFromAdapter() }
        default:
            break
        }
    }

    // MARK: Registration

    static let gattManager = "org.bluez.GattManager1"
    static let advertisingManager = "org.bluez.LEAdvertisingManager1"

    /// Runs `body` when no other registration change runs (they call back into this actor and
    /// must not interleave).
    func serialized<T>(_ body: () async throws -> T) async throws -> T {
        while operationRunning {
            await withCheckedContinuation { operationWaiters.append($0) }
            if closed {
                throw closedError("register")
            }
        }
        operationRunning = true
        defer {
            operationRunning = false
            operationWaiters.popFirst()?.resume()
        }
        return try await body()
    }

    /// After power-on or bluetoothd's return: registers what should be registered.
    func recover() async {
        _ = try? await serialized {
            guard state == .poweredOn, !closed else { return }
            if !localServices.isEmpty, !applicationRegistered {
                do {
                    try await registerApplication()
                    emit(.servicesRegistered(localServices))
                } catch {
                    emit(
                        .registrationFailed(
                            PeripheralError.wrap(error, operation: "register the GATT application again")))
                }
            }
            if let wanted = advertisement, !advertisementRegistered {
                do {
                    if advertisementUnfitted {
                        // Kept while the adapter was off: fitted now that BlueZ says what it supports.
                        let fitted = try await fitted(wanted, operation: "register the advertisement again")
                        if fitted != wanted { try reexportAdvertisement(fitted) }
                        advertisementUnfitted = false
                    }
                    try await registerAdvertisement()
                    emit(.advertisingStarted)
                } catch {
                    emit(
                        .registrationFailed(PeripheralError.wrap(error, operation: "register the advertisement again")))
                }
            }
        }
    }

    func registerApplication() async throws {
        guard let adapterPath else { throw stateError("register the GATT application") }
        let operation = "\(Self.gattManager).RegisterApplication"
        do {
            _ = try await callBlueZ(
                adapterPath, Self.gattManager, "RegisterApplication",
                [.objectPath(applicationRoot), .variantDictionary([String: DBusValue]())])
        } catch let error as DBusError where error.name.rawValue == "org.bluez.Error.AlreadyExists" {
            // Still registered from before a power cycle.
        } catch {
            throw PeripheralError.wrap(error, operation: operation)
        }
        applicationRegistered = true
        registeredAdapter = adapterPath
    }

    func unregisterApplication() async {
        guard applicationRegistered, let adapter = registeredAdapter else { return }
        applicationRegistered = false
        _ = try? await callBlueZ(adapter, Self.gattManager, "UnregisterApplication", [.objectPath(applicationRoot)])
        resetSubscriptions()
    }

    /// bluetoothd forgot its CCCD state (unregistered, restarted, powered off): every
    /// subscription ends.
    func resetSubscriptions() {
        for (path, record) in characteristicRecords where record.notifying {
            characteristicRecords[path]?.notifying = false
            emit(.unsubscribed(record.local))
        }
    }

    /// Runs `body` isolated on this actor from a D-Bus handler (which runs on the loop thread).
    nonisolated func onLoop(_ body: (isolated PeripheralManager) -> Void) {
        assumeIsolated(body)
    }
}

// MARK: The life cycle both managers share

extension PeripheralManager {
    typealias FailureCode = PeripheralErrorCode
    static let role = "peripheral"
    nonisolated var adapterSelector: AdapterSelector { options.adapter }
    nonisolated var callTimeout: Duration { options.callTimeout }
}
