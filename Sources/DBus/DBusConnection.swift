internal import CDBus
import EventLoop
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A connection to a D-Bus message bus, driven by an ``EventLoop``.
///
/// The connection is an actor whose executor *is* the loop thread: every libdbus call happens on
/// that thread, and libdbus's watch, timeout and wake-up hooks
/// (`dbus_connection_set_watch_functions`, `…_set_timeout_functions`,
/// `…_set_wakeup_main_function`) are bridged to the loop's `poll()`. Incoming messages are
/// dispatched (`dbus_connection_dispatch`) from a loop prepare hook, before each `poll()`. Nothing
/// ever blocks the loop: bus registration (`Hello`), `AddMatch`, `RequestName` are asynchronous
/// method calls.
///
/// Other actors bound to the same loop (`unownedExecutor` = `loop.asUnownedSerialExecutor()`)
/// may call the connection's isolated methods synchronously via `assumeIsolated`.
///
/// Cleanup: call ``close()`` when done. Until then libdbus holds the connection (its hooks keep a
/// reference), so dropping the last Swift reference does not close it. Closing fails pending calls
/// with `Disconnected`, finishes every signal stream, and forgets exported objects.
public actor DBusConnection: LoopIsolated {
    /// Which bus to connect to.
    public enum Bus: Sendable, Hashable {
        /// The system bus: `$DBUS_SYSTEM_BUS_ADDRESS`, else `unix:path=/var/run/dbus/system_bus_socket`.
        case system
        /// The session bus: `$DBUS_SESSION_BUS_ADDRESS` (required).
        case session
        /// An explicit D-Bus address such as `unix:path=/tmp/x/bus`.
        case address(String)

        /// The address string this bus resolves to now.
        /// - Throws: ``DBusError`` `BadAddress` for `.session` without `DBUS_SESSION_BUS_ADDRESS`.
        public func resolvedAddress() throws -> String {
            switch self {
            case .system:
                return getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) }
                    ?? "unix:path=/var/run/dbus/system_bus_socket"
            case .session:
                guard let value = getenv("DBUS_SESSION_BUS_ADDRESS") else {
                    throw DBusError(.badAddress, "DBUS_SESSION_BUS_ADDRESS is not set; no session bus to connect to")
                }
                return String(cString: value)
            case .address(let address):
                return address
            }
        }
    }

    /// The loop that owns this connection.
    public nonisolated let loop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    private nonisolated let uniqueNameStorage = Mutex<String>("")

    /// The unique name the bus assigned (e.g. `:1.42`). Readable from any thread.
    public nonisolated var uniqueName: String { uniqueNameStorage.withLock { $0 } }

    /// The libdbus `DBusConnection*`; nil once closed.
    var raw: OpaquePointer?
    var watches: [OpaquePointer: EventLoop.Token] = [:]
    /// Seconds the socket's read watch rests after a handling while no call waits for its reply
    /// (``setInputCoalescing(_:)``); 0: never.
    var inputCoalescing: Double = 0
    var timeouts: [OpaquePointer: EventLoop.Token?] = [:]
    var prepareHook: EventLoop.Token?
    var nextID: UInt64 = 1
    var pendingCalls: [UInt64: PendingCall] = [:]
    var pendingByPointer: [OpaquePointer: UInt64] = [:]
    /// Calls whose reply was dispatched but whose caller has not resumed on the loop yet; while
    /// there are any (until ``heldUntil``), later messages wait (``dispatchQueued()``).
    var unresumedCalls: Set<UInt64> = []
    var heldUntil: UInt64 = 0
    var holdTimer: EventLoop.Token?
    var subscriptions: [UInt64: SignalSubscription] = [:]
    /// Long strings of received signals, reused while they repeat (``StringCache``).
    let signalStrings = StringCache()
    var objects: [DBusObjectPath: ExportedObject] = [:]
    /// Current owners of well-known names used as match-rule senders (nil: no owner), with the
    /// number of subscriptions using each and the id of the internal NameOwnerChanged subscription.
    var senderOwners: [String: SenderOwner] = [:]
    var objectManagers: Set<DBusObjectPath> = []

    struct SenderOwner {
        var owner: String?
        var users: Int
        var subscription: UInt64
    }

    struct PendingCall {
        var pending: OpaquePointer
        var continuation: CheckedContinuation<[DBusValue], any Error>
    }

    init(loop: EventLoop) {
        self.loop = loop
    }

    /// Connects to `bus` on `loop` and registers with it (an asynchronous `Hello`).
    ///
    /// Uses `dbus_connection_open_private`, so the connection is this object's alone; the unique
    /// name is then set with `dbus_bus_set_unique_name`, as `dbus_bus_register` would.
    /// - Throws: ``DBusError`` from libdbus (e.g. `org.freedesktop.DBus.Error.FileNotFound` when
    ///   the socket does not exist, `NoServer`, `BadAddress`) or from `Hello`.
    public static func connect(to bus: Bus = .system, on loop: EventLoop) async throws -> DBusConnection {
        let address = try bus.resolvedAddress()
        let connection = DBusConnection(loop: loop)
        try await connection.open(address: address)
        do {
            let reply = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", method: "Hello", timeout: .seconds(25))
            guard let name = reply.first?.string else {
                throw DBusError(.failed, "Hello returned no unique name")
            }
            try await connection.finishRegistration(uniqueName: name)
        } catch {
            await connection.close()
            throw error
        }
        return connection
    }

    private func open(address: String) throws {
        let opened = try LibDBus.withError { error in
            address.withCString { dbus_connection_open_private($0, error) }
        }
        let connection = try LibDBus.check(opened, "dbus_connection_open_private")
        raw = connection
        dbus_connection_set_exit_on_disconnect(connection, 0)
        let release: DBusFreeFunction = { data in
            if let data { Unmanaged<DBusConnection>.fromOpaque(data).release() }
        }
        // Each hook holds its own reference to `self`, dropped by libdbus through `release`.
        try LibDBus.check(
            dbus_connection_set_watch_functions(
                connection,
                { watch, data in DBusConnection.hook(watch, data, otherwise: 0) { $0.addWatch($1) } },
                { watch, data in DBusConnection.hook(watch, data, otherwise: ()) { $0.removeWatch($1) } },
                { watch, data in DBusConnection.hook(watch, data, otherwise: ()) { $0.toggleWatch($1) } },
                Unmanaged.passRetained(self).toOpaque(), release),
            "dbus_connection_set_watch_functions")
        try LibDBus.check(
            dbus_connection_set_timeout_functions(
                connection,
                { timeout, data in DBusConnection.hook(timeout, data, otherwise: 0) { $0.addTimeout($1) } },
                { timeout, data in DBusConnection.hook(timeout, data, otherwise: ()) { $0.removeTimeout($1) } },
                { timeout, data in DBusConnection.hook(timeout, data, otherwise: ()) { $0.toggleTimeout($1) } },
                Unmanaged.passRetained(self).toOpaque(), release),
            "dbus_connection_set_timeout_functions")
        // Dispatching happens in the prepare hook before every poll(), so a wake-up only matters
        // when libdbus is poked from another thread, which this design never does; still, make
        // it correct by waking the loop.
        dbus_connection_set_wakeup_main_function(
            connection,
            { data in
                guard let connection = DBusConnection.from(data), !connection.loop.inLoop else { return }
                connection.loop.execute {}
            },
            Unmanaged.passRetained(self).toOpaque(), release)
        try LibDBus.check(
            dbus_connection_add_filter(
                connection,
                { _, message, data in
                    guard let message, let connection = DBusConnection.from(data) else {
                        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
                    }
                    let pointer = LoopPointer(message)
                    return connection.assumeLoopIsolated { $0.handleIncoming(pointer.raw) }
                },
                Unmanaged.passRetained(self).toOpaque(), release),
            "dbus_connection_add_filter")
        prepareHook = loop.addPrepareHook { [self] in
            self.assumeLoopIsolated { $0.dispatchQueued() }
        }
    }

    private func finishRegistration(uniqueName name: String) throws {
        guard let raw else { throw DBusError(.disconnected, "connection closed during registration") }
        try LibDBus.check(name.withCString { dbus_bus_set_unique_name(raw, $0) }, "dbus_bus_set_unique_name")
        uniqueNameStorage.withLock { $0 = name }
    }

    /// Closes the connection (`dbus_connection_close`, then `dbus_connection_unref`).
    ///
    /// Pending calls fail with `org.freedesktop.DBus.Error.Disconnected`, signal streams finish,
    /// exported objects are forgotten (peers see this connection's unique name vanish, with no
    /// `InterfacesRemoved`). Safe to call more than once.
    public func close() {
        teardown()
    }

    /// True until ``close()`` or a disconnect from the bus side.
    public var isConnected: Bool {
        guard let raw else { return false }
        return dbus_connection_get_is_connected(raw) != 0
    }

    func teardown() {
        guard let connection = raw else { return }
        raw = nil
        if let prepareHook { loop.removePrepareHook(prepareHook) }
        prepareHook = nil
        let calls = pendingCalls
        pendingCalls.removeAll()
        pendingByPointer.removeAll()
        for call in calls.values {
            dbus_pending_call_cancel(call.pending)
            dbus_pending_call_unref(call.pending)
            call.continuation.resume(throwing: DBusError(.disconnected, "connection closed before the reply arrived"))
        }
        let streams = subscriptions
        subscriptions.removeAll()
        for subscription in streams.values { subscription.finish() }
        objects.removeAll()
        objectManagers.removeAll()
        senderOwners.removeAll()
        dbus_connection_close(connection)
        // Dropping the hooks releases the references they hold on `self`.
        dbus_connection_set_watch_functions(connection, nil, nil, nil, nil, nil)
        dbus_connection_set_timeout_functions(connection, nil, nil, nil, nil, nil)
        dbus_connection_set_wakeup_main_function(connection, nil, nil, nil)
        for token in watches.values { loop.removeWatch(token) }
        watches.removeAll()
        for case let token? in timeouts.values { loop.cancelTimer(token) }
        timeouts.removeAll()
        dbus_connection_unref(connection)  // finalising it releases the filter's reference
    }

    nonisolated static func from(_ data: UnsafeMutableRawPointer?) -> DBusConnection? {
        data.map { Unmanaged<DBusConnection>.fromOpaque($0).takeUnretainedValue() }
    }

    /// What libdbus's hooks for watches, timeouts and pending calls do: run `body` with the hook's
    /// object on the connection `data` holds, isolated (libdbus calls them on the loop's thread),
    /// or answer `otherwise` when either is missing. The hooks are C function pointers, which
    /// cannot capture, so each names its method and this does the rest.
    nonisolated static func hook<Result: Sendable>(
        _ object: OpaquePointer?, _ data: UnsafeMutableRawPointer?, otherwise: Result,
        _ body: @Sendable (isolated DBusConnection, OpaquePointer) -> Result
    ) -> Result {
        guard let object, let connection = from(data) else { return otherwise }
        let pointer = LoopPointer(object)
        return connection.assumeIsolated { body($0, pointer.raw) }
    }

    func allocateID() -> UInt64 {
        defer { nextID &+= 1 }
        return nextID
    }

    // MARK: Watches and timeouts (libdbus → EventLoop)

    private func addWatch(_ watch: OpaquePointer) -> dbus_bool_t {
        let fd = dbus_watch_get_unix_fd(watch)
        guard fd >= 0 else { return 0 }
        let token = loop.addWatch(fd: fd, events: Self.events(of: watch)) { revents in
            var flags: UInt32 = 0
            if revents.contains(.readable) { flags |= DBUS_WATCH_READABLE.rawValue }
            if revents.contains(.writable) { flags |= DBUS_WATCH_WRITABLE.rawValue }
            if revents.contains(.error) { flags |= DBUS_WATCH_ERROR.rawValue }
            if revents.contains(.hangup) { flags |= DBUS_WATCH_HANGUP.rawValue }
            _ = dbus_watch_handle(watch, flags)
        }
        watches[watch] = token
        if Self.isReadWatch(watch) { loop.setCoalescing(token, interval: currentInputCoalescing) }
        return 1
    }

    /// Coalesces what the bus sends this connection: once the socket was read, it is not polled
    /// again for `seconds` while no call of this connection waits for its reply, so a steady
    /// stream of signals (advertisements) is read in batches, one wake-up per `seconds`
    /// (``EventLoop/setCoalescing(_:interval:)``). The first message after a quiet spell is read
    /// at once, and a call's reply is never held: while a call is pending the socket is polled
    /// as usual (a rest under way ends when the call is made). Signals and method calls from
    /// others wait up to `seconds`. 0 (the default): every message is read as it arrives.
    public func setInputCoalescing(_ seconds: Double) {
        inputCoalescing = seconds.isFinite && seconds > 0 ? seconds : 0
        applyInputCoalescing()
    }

    /// The read watch's rest now: none while a call waits for its reply.
    private var currentInputCoalescing: Double { pendingCalls.isEmpty ? inputCoalescing : 0 }

    /// Gives the read watches their rest after a change of ``inputCoalescing`` or of the calls
    /// pending (the first call made, the last one answered).
    func applyInputCoalescing() {
        let interval = currentInputCoalescing
        for (watch, token) in watches where Self.isReadWatch(watch) {
            loop.setCoalescing(token, interval: interval)
        }
    }

    private static func isReadWatch(_ watch: OpaquePointer) -> Bool {
        let flags = dbus_watch_get_flags(watch)
        return flags & DBUS_WATCH_READABLE.rawValue != 0 && flags & DBUS_WATCH_WRITABLE.rawValue == 0
    }

    private func removeWatch(_ watch: OpaquePointer) {
        if let token = watches.removeValue(forKey: watch) { loop.removeWatch(token) }
    }

    private func toggleWatch(_ watch: OpaquePointer) {
        if let token = watches[watch] { loop.updateWatch(token, events: Self.events(of: watch)) }
    }

    private static func events(of watch: OpaquePointer) -> EventLoop.IOEvents {
        guard dbus_watch_get_enabled(watch) != 0 else { return [] }
        let flags = dbus_watch_get_flags(watch)
        var events: EventLoop.IOEvents = []
        if flags & DBUS_WATCH_READABLE.rawValue != 0 { events.insert(.readable) }
        if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { events.insert(.writable) }
        return events
    }

    private func addTimeout(_ timeout: OpaquePointer) -> dbus_bool_t {
        timeouts[timeout] = arm(timeout)
        return 1
    }

    private func removeTimeout(_ timeout: OpaquePointer) {
        if case let token?? = timeouts.removeValue(forKey: timeout) { loop.cancelTimer(token) }
    }

    private func toggleTimeout(_ timeout: OpaquePointer) {
        guard let slot = timeouts[timeout] else { return }
        if let token = slot { loop.cancelTimer(token) }
        timeouts[timeout] = arm(timeout)
    }

    /// libdbus timeouts repeat until removed or disabled; loop timers are one-shot, so each
    /// firing re-arms.
    private func arm(_ timeout: OpaquePointer) -> EventLoop.Token? {
        guard dbus_timeout_get_enabled(timeout) != 0 else { return nil }
        let milliseconds = dbus_timeout_get_interval(timeout)
        let pointer = LoopPointer(timeout)
        return loop.addTimer(after: Double(milliseconds) / 1000) { [self] in
            self.assumeIsolated { $0.timeoutFired(pointer.raw) }
        }
    }

    private func timeoutFired(_ timeout: OpaquePointer) {
        guard timeouts[timeout] != nil else { return }
        timeouts[timeout] = .some(nil)
        _ = dbus_timeout_handle(timeout)
        // Still registered and not re-armed by a toggle during handling: re-arm.
        if let slot = timeouts[timeout], slot == nil {
            timeouts[timeout] = arm(timeout)
        }
    }

    // MARK: Dispatch

    /// Dispatches the messages libdbus has read, in order — but none after a reply until the
    /// caller it resumed runs on the loop again (``call(destination:path:interface:method:arguments:expecting:timeout:)``
    /// after its `await`): otherwise the signals sent after the reply could be handled first, and
    /// the caller would apply what the reply holds (a `GetManagedObjects` snapshot) over newer
    /// changes already seen, which would be lost. A continuation resumes through the "generic"
    /// executor; `call` makes that this loop (a task executor preference), so the caller is
    /// queued here as the reply is dispatched and runs on the next drain. The wait is bounded
    /// (``replyHold``) as a safety net: a caller that cannot run does not stall the bus.
    private func dispatchQueued() {
        guard let raw else { return }
        if !unresumedCalls.isEmpty {
            if EventLoop.now() < heldUntil {
                if holdTimer == nil {
                    holdTimer = loop.addTimer(after: Double(Self.replyHold) / 1e9) { [weak self] in
                        self?.assumeLoopIsolated { $0.holdTimer = nil }
                    }
                }
                return
            }
            unresumedCalls.removeAll()
        }
        while dbus_connection_dispatch(raw) == DBUS_DISPATCH_DATA_REMAINS {
            if self.raw == nil || !unresumedCalls.isEmpty { return }
        }
    }

    /// How long (ns) messages after a reply wait at most for its caller to resume.
    static let replyHold: UInt64 = 50_000_000

    /// The caller of call `id` runs on the loop again: messages after its reply may be dispatched.
    func callerResumed(_ id: UInt64) {
        guard unresumedCalls.remove(id) != nil, unresumedCalls.isEmpty else { return }
        // Queued work makes the loop poll without sleeping, so its next turn dispatches.
        loop.execute {}
    }

    /// The filter every incoming message passes (`dbus_connection_add_filter`). Replies to our
    /// pending calls never get here; libdbus routes them to the pending call first.
    private func handleIncoming(_ message: OpaquePointer) -> DBusHandlerResult {
        switch dbus_message_get_type(message) {
        case DBUS_MESSAGE_TYPE_SIGNAL:
            if dbus_message_is_signal(message, "org.freedesktop.DBus.Local", "Disconnected") != 0 {
                loop.execute { [self] in self.assumeIsolated { $0.teardown() } }
                return DBUS_HANDLER_RESULT_HANDLED
            }
            deliverSignal(message)
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        case DBUS_MESSAGE_TYPE_METHOD_CALL:
            return handleMethodCall(message) ? DBUS_HANDLER_RESULT_HANDLED : DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        default:
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
    }
}
