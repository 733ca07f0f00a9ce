import Bluetooth
import DBus
import EventLoop

/// The life both managers lead (``CentralManager``, ``PeripheralManager``; docs/bluez.md §6): one
/// D-Bus connection, made at the start; the owner of `org.bluez` followed, and its objects read
/// again whenever a new one comes; the adapter chosen among them and the state it implies, told to
/// the state's listeners; the errors of an operation the state does not allow; the close. What a
/// manager does on top is its own: the hooks (``subscribe()``, ``setState(_:)``, ``bluezLost()``,
/// ``objectsLoaded()``, ``accessRefused()``), each a requirement, so a manager without one does
/// not compile.
protocol BlueZManager: ObjectTreeHolder, LoopIsolated {
    /// The codes of the manager's errors (``CentralErrorCode``, ``PeripheralErrorCode``).
    associatedtype FailureCode: BlueZErrorCode
    /// The manager's error type.
    typealias Failure = BlueZOperationError<FailureCode>

    /// `central` or `peripheral`: in messages, and which adapters qualify
    /// (``BlueZObjectTree/adapter(matching:role:)``).
    static var role: String { get }
    /// Which adapter to use (the options').
    nonisolated var adapterSelector: AdapterSelector { get }
    /// How long a BlueZ call may take when the caller says nothing (the options').
    nonisolated var callTimeout: Duration { get }

    var connection: DBusConnection { get }
    var bluezOwner: String? { get set }
    var adapterPath: DBusObjectPath? { get set }
    var state: CentralState { get set }
    var closed: Bool { get set }
    var nextID: Int { get set }
    var signalTasks: [Task<Void, Never>] { get set }
    /// Where state changes go: ``stateStream()`` streams and ``addStateHandler(_:)`` handlers.
    var stateContinuations: [Int: EventSink<CentralState>] { get set }
    /// The adapter's name (`hci0`), or the selector's description while no adapter is chosen.
    var adapterName: String { get }

    /// The manager's own subscriptions at the start, before `org.bluez` is followed.
    func subscribe() async throws
    /// Ends the manager (its public `close()`).
    func close() async
    /// The state is `newState` now (``changeState(to:)``, then what that means to the manager).
    func setState(_ newState: CentralState)
    /// bluetoothd left the bus: every object is gone, and with them what the manager had
    /// registered or subscribed.
    func bluezLost()
    /// The objects were read again (at the start, after bluetoothd came back, or once the bus let
    /// the manager in): choose the adapter (``chooseAdapter()``) and take up what is there.
    func objectsLoaded()
    /// The bus refused access to `org.bluez` (the state is `.unauthorized` now).
    func accessRefused()
}

extension BlueZManager {
    /// Connects to `bus` and starts the manager `make` makes on that connection: its own
    /// subscriptions (``subscribe()``), then following `org.bluez`; returns once the state is
    /// known. Closed again when that fails; a bus that cannot be reached is `bluezUnavailable`.
    static func start(bus: DBusConnection.Bus, on loop: EventLoop, _ make: (DBusConnection) -> Self) async throws
        -> Self
    {
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.connect(to: bus, on: loop)
        } catch {
            throw Failure.wrap(error, operation: "connect to the D-Bus system bus").withCode(.bluezUnavailable)
        }
        let manager = make(connection)
        do {
            try await manager.begin()
        } catch {
            await manager.close()
            throw Failure.wrap(error, operation: "subscribe to org.bluez signals")
        }
        return manager
    }

    private func begin() async throws {
        try await subscribe()
        try await followBlueZ()
    }

    /// Follows the owner of `org.bluez` from now on and reads its objects; returns once the state
    /// is known.
    private func followBlueZ() async throws {
        let owners = try await connection.nameOwnerChanges(of: "org.bluez")
        signalTasks.append(
            Task { [weak self] in
                for await change in owners { await self?.bluezOwnerChanged(to: change.newOwner) }
            })
        let owner: String?
        do {
            owner = try await connection.nameOwner("org.bluez")
        } catch let error as DBusError where error.name == .accessDenied {
            setState(.unauthorized)
            return accessRefused()
        }
        await bluezOwnerChanged(to: owner)
    }

    /// `org.bluez` has a new owner (nil: none): what the old one had is lost, and the new one's
    /// objects are read.
    func bluezOwnerChanged(to owner: String?) async {
        guard !closed else { return }
        if owner == bluezOwner && state != .unknown { return }
        let previous = bluezOwner
        bluezOwner = owner
        if previous != nil { bluezLost() }
        guard owner != nil else {
            setState(previous == nil ? .unsupported : .resetting)
            return
        }
        await reload()
    }

    /// Reads every object (`GetManagedObjects`, ``BlueZPresence/reload(_:into:)``), then
    /// ``objectsLoaded()``.
    func reload() async {
        switch await BlueZPresence.reload(connection, into: self) {
        case .objects: break
        case .accessDenied:
            setState(.unauthorized)
            return accessRefused()
        case .unavailable: return setState(bluezOwner == nil ? .unsupported : .resetting)
        case .empty: return
        }
        objectsLoaded()
    }

    /// Picks the adapter among the objects (``adapterSelector``).
    func chooseAdapter() {
        adapterPath = tree.adapter(matching: adapterSelector, role: Self.role)
    }

    /// The state the chosen adapter implies.
    func updateStateFromAdapter() {
        setState(BlueZPresence.state(bluezPresent: bluezOwner != nil, adapterPath: adapterPath, tree: tree))
    }

    /// Sets ``state`` and tells its listeners; the state before, or nil when it did not change.
    func changeState(to newState: CentralState) -> CentralState? {
        guard newState != state else { return nil }
        let old = state
        state = newState
        for sink in stateContinuations.values { sink.deliver(newState) }
        return old
    }

    /// The state now, then every change, as an `AsyncStream` (newest 16 buffered); finished at
    /// once when the manager is closed.
    func stateStream() -> AsyncStream<CentralState> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: CentralState.self, bufferingPolicy: .bufferingNewest(16))
        continuation.yield(state)
        guard let id = register(continuation) else { return stream }
        stateContinuations[id] = .stream(continuation)
        continuation.onTermination = unregistering { _ = $0.stateContinuations.removeValue(forKey: id) }
        return stream
    }

    /// The state now, then every change, to `handler` on the loop thread; the registration's id.
    func addStateHandler(_ handler: @escaping @Sendable (CentralState) -> Void) -> Int {
        handler(state)
        return stateContinuations.addHandler(handler, id: makeID(), unlessClosed: closed)
    }

    /// The id for a new stream, or nil when the manager is closed (the stream is finished then).
    func register<Event>(_ continuation: AsyncStream<Event>.Continuation) -> Int? {
        if closed {
            continuation.finish()
            return nil
        }
        return makeID()
    }

    /// A stream's `onTermination` that runs `remove` on the manager (on its loop).
    nonisolated func unregistering<Event>(_ remove: @escaping @Sendable (isolated Self) -> Void)
        -> @Sendable (AsyncStream<Event>.Continuation.Termination) -> Void
    {
        { [weak self] _ in
            guard let self else { return }
            self.loop.execute { self.assumeLoopIsolated(remove) }
        }
    }

    /// The error an operation gets while the state is not `.poweredOn`.
    func stateError(_ operation: String) -> Failure {
        let (code, message) = BlueZPresence.unavailability(
            state, manager: "\(Self.role) manager", adapterName: adapterName, selector: adapterSelector,
            role: Self.role, bluezPresent: bluezOwner != nil)
        return Failure(FailureCode(rawValue: code) ?? .failed, operation: operation, message: message)
    }

    /// Throws unless the manager is open and `.poweredOn`.
    func requirePoweredOn(_ operation: String) throws {
        if closed { throw closedError(operation) }
        guard state == .poweredOn else { throw stateError(operation) }
    }

    /// The error of an operation that finds the manager closed.
    func closedError(_ operation: String) -> Failure {
        Failure(.cancelled, operation: operation, message: "the \(Self.role) manager was closed")
    }

    /// Waits until ``state`` is `.poweredOn` (the managers' `waitUntilPoweredOn(timeout:)`): at
    /// most `timeout`, then the state's error (``stateError(_:)``: its meaning and what to do);
    /// `cancelled` when the manager is closed meanwhile or the waiting task is cancelled.
    func waitForPowerOn(timeout: Duration) async throws {
        let operation = "wait for the adapter to be powered on"
        if state == .poweredOn { return }
        let updates = stateStream()
        let reached = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await state in updates where state == .poweredOn { return true }
                return false  // closed, or cancelled
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if reached || state == .poweredOn { return }
        if closed { throw closedError(operation) }
        if Task.isCancelled { throw Failure(.cancelled, operation: operation, message: "cancelled") }
        throw stateError(operation)
    }

    /// The chosen adapter's address.
    var chosenAdapterAddress: BluetoothAddress? {
        adapterPath.flatMap { tree.properties($0, BlueZObjectTree.adapter)?["Address"]?.string }.flatMap(
            BluetoothAddress.init)
    }

    func makeID() -> Int {
        nextID += 1
        return nextID
    }

    /// Calls a BlueZ method (destination `org.bluez`), within ``callTimeout`` unless `timeout` says.
    func callBlueZ(
        _ path: DBusObjectPath, _ interface: String, _ method: String, _ arguments: [DBusValue] = [],
        timeout: Duration? = nil
    ) async throws -> [DBusValue] {
        try await connection.call(
            destination: "org.bluez", path: path, interface: interface, method: method, arguments: arguments,
            timeout: timeout ?? callTimeout)
    }

    /// The end of the life: the state's streams finish, the signal tasks end, the connection
    /// closes (after what the manager itself ends at its close).
    func closeConnection() async {
        for case .stream(let continuation) in stateContinuations.values { continuation.finish() }
        stateContinuations.removeAll()
        for task in signalTasks { task.cancel() }
        await connection.close()
    }
}
