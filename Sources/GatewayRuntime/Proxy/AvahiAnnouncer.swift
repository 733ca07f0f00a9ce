import DBus
import ESPHomeAPI
import EventLoop
import Gateway

/// Announces the Bluetooth proxy as `_esphomelib._tcp` through Avahi's D-Bus API on the system bus
/// (org.freedesktop.Avahi: `Server.EntryGroupNew`, then `EntryGroup.AddService` and `Commit`), so
/// Home Assistant discovers it like an ESPHome device (docs/ha-bluetooth-proxy.md, "mDNS").
///
/// It follows what Avahi says afterwards:
/// - the group's `StateChanged`: a **collision** (another device on the network announces the
///   name, or another program on this machine: `AddService` then fails with `CollisionError`)
///   re-registers the service under Avahi's alternative name (`Server.GetAlternativeServiceName`:
///   `name #2`, `name #3`, …), at most ``maximumAlternatives`` times, each with a warning that says
///   which name is announced now; after the last one the group is freed and the proxy goes on
///   without mDNS (an error says so). A **failure** is logged and the group freed.
/// - the owner of `org.freedesktop.Avahi`: when avahi-daemon restarts (or starts after gattway),
///   the service is announced again to the new daemon, under the configured name first; while
///   there is none the proxy is not announced.
///
/// Only the mDNS instance name changes: the node name in the Noise hello, DeviceInfo and the TXT
/// record's `friendly_name` stay the configured one (Home Assistant stores it and checks it on
/// every reconnection).
///
/// Everything Avahi reports goes through one stream, in the order the bus delivered it, to
/// ``run()`` (a child task of the proxy's), which handles each event to its end before the next,
/// so no two registrations overlap.
public final class AvahiAnnouncer: Sendable {
    public static let service = "org.freedesktop.Avahi"
    public static let serviceType = "_esphomelib._tcp"
    public static let serverInterface = "org.freedesktop.Avahi.Server"
    public static let groupInterface = "org.freedesktop.Avahi.EntryGroup"
    /// Alternative names tried after a collision before giving up (per avahi-daemon instance).
    public static let maximumAlternatives = 10

    /// `AVAHI_ENTRY_GROUP_*` of the group's `StateChanged` signal.
    enum GroupState: Int {
        case uncommitted = 0, registering = 1, established = 2, collision = 3, failure = 4
    }

    enum Event: Sendable {
        /// `GetNameOwner(org.freedesktop.Avahi)` at the start (nil: no avahi-daemon).
        case initialOwner(String?)
        /// `NameOwnerChanged` of `org.freedesktop.Avahi`: the new owner (nil: gone).
        case ownerChanged(String?)
        /// An entry group's `StateChanged(i state, s error)`, with the signal's sender and path.
        case state(sender: String?, group: DBusObjectPath?, state: Int, error: String)
        /// The server's key changed (a client provisioned the proxy, or cleared its key): the
        /// TXT record changes with it and is announced again.
        case configuration(APIServerConfiguration)
    }

    private let connection: DBusConnection
    private let handlers: [DBusSignalHandler]
    private let stream: AsyncStream<Event>
    private let events: AsyncStream<Event>.Continuation
    private let configuration: APIServerConfiguration
    private let port: UInt16
    private let log: GatewayLogger
    /// ``withdraw()`` asked for the end.
    private let withdrawal = OneShot<Void>()
    /// ``run()`` freed the group and closed the connection.
    private let withdrawn = OneShot<Void>()

    private init(
        connection: DBusConnection, handlers: [DBusSignalHandler],
        events: (AsyncStream<Event>, AsyncStream<Event>.Continuation), configuration: APIServerConfiguration,
        port: UInt16, log: GatewayLogger
    ) {
        self.connection = connection
        self.handlers = handlers
        (stream, self.events) = events
        self.configuration = configuration
        self.port = port
        self.log = log
    }

    /// What ended the handling of events.
    private enum Outcome: Sendable {
        case withdrawing
        /// The last event was handled: the daemon and group to free, if any.
        case ended((owner: String, group: DBusObjectPath)?)
    }

    /// The TXT record of an ESPHome device's announcement, as Home Assistant reads it: `mac`
    /// (12 lower-case hex digits, its unique id), `version`, `friendly_name`, `network`, `platform`,
    /// `board`, the project, and `api_encryption` when the API is encrypted — or, unprovisioned
    /// (no key yet, keyless adoption), `api_encryption_supported` and `api_provisioning=zero-psk`,
    /// as an ESPHome device without a key announces itself.
    public static func txt(_ configuration: APIServerConfiguration) -> [String] {
        var records = [
            "friendly_name=\(configuration.friendlyName)", "version=\(APIServer.esphomeVersion)",
            "mac=\(configuration.macAddress.lowercased().filter { $0 != ":" })", "platform=host", "board=gattway",
            "network=ethernet", "project_name=gattway.gattway", "project_version=\(configuration.version)",
        ]
        if configuration.provisionable {
            records += ["api_encryption_supported=Noise_NNpsk0_25519_ChaChaPoly_SHA256", "api_provisioning=zero-psk"]
        } else if case .noise = configuration.encryption {
            records.append("api_encryption=Noise_NNpsk0_25519_ChaChaPoly_SHA256")
        }
        return records
    }

    /// Connects to `bus` (the system bus; a private one in tests) and follows Avahi there;
    /// ``run()`` then announces the service whenever avahi-daemon is on the bus (now or later).
    /// Throws only when there is no such bus; every later problem is logged and the proxy goes on
    /// without mDNS.
    public static func start(
        _ configuration: APIServerConfiguration, port: UInt16, on loop: EventLoop, log: GatewayLogger,
        bus: DBusConnection.Bus = .system
    ) async throws -> AvahiAnnouncer {
        let connection = try await DBusConnection.connect(to: bus, on: loop)
        // Unbounded, but only avahi-daemon's signals for this connection's groups and the bus's
        // owner changes of one name arrive here, and each is handled at once.
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self)
        var handlers: [DBusSignalHandler] = []
        do {
            handlers.append(
                try await connection.handleSignals(
                    matching: DBusMatchRule(
                        sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                        interface: "org.freedesktop.DBus", member: "NameOwnerChanged", arguments: [0: service])
                ) { message in
                    guard message.arguments.count == 3, let owner = message.arguments[2].string else { return }
                    continuation.yield(.ownerChanged(owner.isEmpty ? nil : owner))
                })
            // Avahi sends these to the group's client only; the sender is checked against the
            // daemon's unique name when handled.
            handlers.append(
                try await connection.handleSignals(
                    matching: DBusMatchRule(interface: groupInterface, member: "StateChanged")
                ) { message in
                    guard let state = message.arguments.first?.int else { return }
                    continuation.yield(
                        .state(
                            sender: message.sender, group: message.path, state: state,
                            error: message.arguments.dropFirst().first?.string ?? ""))
                })
            continuation.yield(.initialOwner(try await connection.nameOwner(service)))
        } catch {
            for handler in handlers { handler.cancel() }
            continuation.finish()
            await connection.close()
            throw error
        }
        return AvahiAnnouncer(
            connection: connection, handlers: handlers, events: (stream, continuation), configuration: configuration,
            port: port, log: log)
    }

    /// Handles Avahi's events one at a time until ``withdraw()`` (a registration under way is
    /// then cancelled: its calls end at once), then frees the group (`Free`, 2 s at most) and
    /// closes the connection. Call once. When the calling task is cancelled (the stop's
    /// deadline), what is still waited for ends at once.
    public func run() async {
        let (stream, withdrawal) = (self.stream, self.withdrawal)
        let (connection, configuration, port, log) = (self.connection, self.configuration, self.port, self.log)
        let current = await withTaskGroup(of: Outcome.self) { group in
            group.addTask {
                var publisher = Publisher(connection: connection, configuration: configuration, port: port, log: log)
                for await event in stream { await publisher.handle(event) }
                guard let owner = publisher.owner, let group = publisher.group else { return .ended(nil) }
                return .ended((owner: owner, group: group))
            }
            group.addTask {
                _ = await withdrawal.wait()
                return .withdrawing
            }
            var current: (owner: String, group: DBusObjectPath)?
            while let outcome = await group.next() {
                group.cancelAll()
                if case .ended(let ended) = outcome { current = ended }
            }
            return current
        }
        for handler in handlers { handler.cancel() }
        if let current {
            _ = try? await connection.call(
                destination: current.owner, path: current.group, interface: Self.groupInterface, method: "Free",
                timeout: .seconds(2))
        }
        await connection.close()
        withdrawn.set(())
    }

    /// Announces the TXT record of `configuration` in place of the one announced (the group is
    /// reset and the service registered again under the name it has now).
    public func update(_ configuration: APIServerConfiguration) {
        events.yield(.configuration(configuration))
    }

    /// Withdraws the announcement: ``run()`` ends the handling of events, frees the group and
    /// closes the connection. Returns once that is done, or when the calling task is cancelled.
    public func withdraw() async {
        events.finish()
        withdrawal.set(())
        _ = await withdrawn.wait()
    }
}

/// The state of the announcement, owned by the task of ``AvahiAnnouncer/run()`` that handles the events.
private struct Publisher {
    let connection: DBusConnection
    var configuration: APIServerConfiguration
    let port: UInt16
    let log: GatewayLogger
    /// avahi-daemon's unique name on the bus, nil while there is none.
    var owner: String?
    var ownerChanged = false
    /// The entry group of this daemon, once made (nil: not announced).
    var group: DBusObjectPath?
    /// The instance name registered (or being registered) now.
    var name: String
    var alternatives = 0
    var established = false

    init(connection: DBusConnection, configuration: APIServerConfiguration, port: UInt16, log: GatewayLogger) {
        self.connection = connection
        self.configuration = configuration
        self.port = port
        self.log = log
        name = configuration.name
    }

    private var byAddress: String { "add it in Home Assistant by address, port \(port)" }

    mutating func handle(_ event: AvahiAnnouncer.Event) async {
        switch event {
        case .initialOwner(let current):
            // A NameOwnerChanged seen first is newer than this answer.
            guard !ownerChanged else { return }
            guard let current else {
                log(
                    .warning,
                    "Bluetooth proxy: not announced by mDNS (avahi-daemon is not on the system bus; announced "
                        + "once it starts); \(byAddress)")
                return
            }
            await publish(to: current)
        case .ownerChanged(let newOwner):
            ownerChanged = true
            guard newOwner != owner else { return }
            // The previous daemon's group went with it.
            owner = nil
            group = nil
            guard let newOwner else {
                log(
                    .warning,
                    "Bluetooth proxy: avahi-daemon left the system bus: not announced by mDNS until it is back")
                return
            }
            log(.notice, "Bluetooth proxy: avahi-daemon is on the system bus: announcing")
            await publish(to: newOwner)
        case .configuration(let changed):
            configuration = changed
            guard let owner, let group else { return }
            do {
                established = false
                _ = try await connection.call(
                    destination: owner, path: group, interface: AvahiAnnouncer.groupInterface, method: "Reset",
                    timeout: .seconds(5))
                try await register()
            } catch {
                notAnnounced(error)
            }
        case .state(let sender, let path, let state, let error):
            guard let owner, sender == owner, let group, path == group else { return }
            do {
                switch AvahiAnnouncer.GroupState(rawValue: state) {
                case .established:
                    guard !established else { return }
                    established = true
                    log(
                        .info,
                        "Bluetooth proxy: announced by mDNS as \(AvahiAnnouncer.serviceType) \"\(name)\" through Avahi")
                case .collision:
                    try await rename(because: "another device on the network announces it")
                case .failure:
                    log(
                        .error,
                        "Bluetooth proxy: Avahi failed to announce \"\(name)\" (\(error.isEmpty ? "no reason given" : error)); "
                            + "not announced by mDNS until avahi-daemon restarts; \(byAddress)")
                    await free()
                default:
                    break
                }
            } catch {
                notAnnounced(error)
            }
        }
    }

    /// A new entry group on the daemon `owner`, registered under the configured name.
    private mutating func publish(to owner: String) async {
        self.owner = owner
        name = configuration.name
        alternatives = 0
        established = false
        do {
            let reply = try await connection.call(
                destination: owner, path: "/", interface: AvahiAnnouncer.serverInterface, method: "EntryGroupNew",
                timeout: .seconds(5))
            guard let path = reply.first?.objectPath else {
                throw DBusError(.failed, "EntryGroupNew returned no object path")
            }
            group = path
            try await register()
        } catch {
            notAnnounced(error)
        }
    }

    /// Adds the service under ``name`` to the (empty) group and commits it. A name another program
    /// on this machine has registered is refused at once (`CollisionError`): the next one is tried.
    private mutating func register() async throws {
        guard let owner, let group else { return }
        let txt = DBusValue.array(
            .array(.byte), AvahiAnnouncer.txt(configuration).map { .array(.byte, Array($0.utf8).map(DBusValue.byte)) })
        do {
            _ = try await connection.call(
                destination: owner, path: group, interface: AvahiAnnouncer.groupInterface, method: "AddService",
                arguments: [
                    // Every interface (-1), IPv4 only (AVAHI_PROTO_INET, 0): the server listens on IPv4.
                    .int32(-1), .int32(0), .uint32(0), .string(name), .string(AvahiAnnouncer.serviceType),
                    .string(""), .string(""), .uint16(port), txt,
                ], timeout: .seconds(5))
        } catch let error as DBusError where error.name.rawValue == "org.freedesktop.Avahi.CollisionError" {
            try await rename(because: "another program on this machine announces it")
            return
        }
        _ = try await connection.call(
            destination: owner, path: group, interface: AvahiAnnouncer.groupInterface, method: "Commit",
            timeout: .seconds(5))
    }

    /// After a collision: the group is reset and the service registered again under Avahi's
    /// alternative name, unless ``AvahiAnnouncer/maximumAlternatives`` were tried already.
    private mutating func rename(because reason: String) async throws {
        guard let owner, let group else { return }
        guard alternatives < AvahiAnnouncer.maximumAlternatives else {
            log(
                .error,
                "Bluetooth proxy: mDNS name collision: \"\(configuration.name)\" and its \(alternatives) alternatives "
                    + "(the last \"\(name)\": \(reason)) are taken: not announced by mDNS; \(byAddress), and set "
                    + "bluetooth_proxy.name to a name no other device on the network uses")
            await free()
            return
        }
        alternatives += 1
        let reply = try await connection.call(
            destination: owner, path: "/", interface: AvahiAnnouncer.serverInterface,
            method: "GetAlternativeServiceName", arguments: [.string(name)], timeout: .seconds(5))
        guard let next = reply.first?.string, !next.isEmpty else {
            throw DBusError(.failed, "GetAlternativeServiceName returned no name")
        }
        log(
            .warning,
            "Bluetooth proxy: the mDNS name \"\(name)\" is taken (\(reason)); announcing as \"\(next)\" instead. "
                + "Set bluetooth_proxy.name to a name no other device on the network uses: Home Assistant tells "
                + "ESPHome devices apart by their name, and the API still answers as \"\(configuration.name)\"")
        name = next
        established = false
        _ = try await connection.call(
            destination: owner, path: group, interface: AvahiAnnouncer.groupInterface, method: "Reset",
            timeout: .seconds(5))
        try await register()
    }

    private mutating func notAnnounced(_ error: any Error) {
        guard !(error is CancellationError) else { return }
        log(.warning, "Bluetooth proxy: not announced by mDNS (Avahi: \(error)); \(byAddress)")
    }

    /// Frees the group: nothing is announced until avahi-daemon restarts.
    private mutating func free() async {
        guard let owner, let group else { return }
        self.group = nil
        _ = try? await connection.call(
            destination: owner, path: group, interface: AvahiAnnouncer.groupInterface, method: "Free",
            timeout: .seconds(2))
    }
}
