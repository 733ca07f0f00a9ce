import DBus
import ESPHomeAPI
import EventLoop
import Synchronization
import TestSupport
import Testing

@testable import GatewayRuntime

/// avahi-daemon's D-Bus API as far as the announcer uses it, owning `org.freedesktop.Avahi` on a
/// private bus: `Server.EntryGroupNew` (a new group object each time), `GetAlternativeServiceName`
/// (`name #2`, `name #3`, …) and the group's `AddService` (CollisionError for a name in `taken`),
/// `Commit`, `Reset` and `Free`, each call noted in ``calls``.
final class FakeAvahi: Sendable {
    let connection: DBusConnection
    private let noted = Mutex<[String]>([])
    private let groups = Mutex(0)
    /// The TXT records of the last `AddService`.
    let txt = Mutex<[String]>([])

    var calls: [String] { noted.withLock { $0 } }

    private init(connection: DBusConnection) { self.connection = connection }

    static func start(on bus: DBusConnection.Bus, loop: EventLoop, taken: Set<String> = []) async throws -> FakeAvahi {
        let fake = FakeAvahi(connection: try await DBusConnection.connect(to: bus, on: loop))
        try await fake.connection.export(
            [
                DBusInterface(
                    AvahiAnnouncer.serverInterface,
                    methods: [
                        DBusMethod("EntryGroupNew", in: nil, out: nil) { _ in
                            let path = try DBusObjectPath(
                                "/Client1/EntryGroup\(fake.groups.withLock { $0 += 1; return $0 })")
                            try await fake.connection.export([fake.group(taken: taken)], at: path)
                            fake.note("EntryGroupNew \(path.rawValue)")
                            return [.objectPath(path)]
                        },
                        DBusMethod("GetAlternativeServiceName", in: nil, out: nil) { call in
                            let name = call.arguments.first?.string ?? ""
                            fake.note("GetAlternativeServiceName \(name)")
                            let number = name.split(separator: "#").last.flatMap { Int($0) } ?? 1
                            let base = name.split(separator: " #").first.map(String.init) ?? name
                            return [.string("\(base) #\(number + 1)")]
                        },
                    ], properties: [], signals: [])
            ], at: "/")
        _ = try await fake.connection.requestName(AvahiAnnouncer.service)
        return fake
    }

    private func note(_ call: String) { noted.withLock { $0.append(call) } }

    private func group(taken: Set<String>) -> DBusInterface {
        func noting(_ method: String) -> DBusMethod {
            DBusMethod(method, in: nil, out: nil) { [self] call in
                note("\(method) \(call.path?.rawValue ?? "")")
                return []
            }
        }
        let addService = DBusMethod("AddService", in: nil, out: nil) { [self] call in
            let arguments = call.arguments
            let name = arguments.count > 3 ? arguments[3].string ?? "" : ""
            let type = arguments.count > 4 ? arguments[4].string ?? "" : ""
            let port = arguments.count > 7 ? arguments[7].int ?? 0 : 0
            if arguments.count > 8, case .array(_, let records) = arguments[8] {
                txt.withLock {
                    $0 = records.map { record in
                        guard case .array(_, let bytes) = record else { return "" }
                        return String(decoding: bytes.compactMap { $0.int.map(UInt8.init) }, as: UTF8.self)
                    }
                }
            }
            note("AddService \(name) \(type) \(port) \(call.path?.rawValue ?? "")")
            if taken.contains(name) { throw DBusError("org.freedesktop.Avahi.CollisionError", "Local name collision") }
            return []
        }
        return DBusInterface(
            AvahiAnnouncer.groupInterface, methods: [addService, noting("Commit"), noting("Reset"), noting("Free")],
            properties: [], signals: [])
    }

    /// The group's `StateChanged(i state, s error)`, as avahi-daemon sends it.
    func groupState(_ state: AvahiAnnouncer.GroupState, of group: String) async throws {
        try await connection.emit(
            path: try DBusObjectPath(group), interface: AvahiAnnouncer.groupInterface, member: "StateChanged",
            arguments: [.int32(Int32(state.rawValue)), .string("")])
    }
}

@Suite("The Bluetooth proxy's Avahi announcer against a fake avahi-daemon on a private bus", .serialized)
struct AvahiAnnouncerTests {
    static let configuration = PureTests.apiConfiguration(.plaintext)
    static let announced = [
        "EntryGroupNew /Client1/EntryGroup1", "AddService kitchen _esphomelib._tcp 6053 /Client1/EntryGroup1",
        "Commit /Client1/EntryGroup1",
    ]

    /// Runs `body` with a private bus, a loop, a journal for the announcer's log and the bus's
    /// address, then stops them.
    static func withBus(_ body: (DBusConnection.Bus, EventLoop, Journal) async throws -> Void) async throws {
        let daemon = try await DBusDaemon()
        let loop = EventLoop(name: "avahi-test")
        defer {
            loop.shutdown()
            daemon.stop()
        }
        try await body(.address(daemon.address), loop, Journal())
    }

    @Test(
        "announces the service with its TXT record, takes Avahi's alternative name after a collision, announces again to a restarted avahi-daemon under the configured name, and frees the group when withdrawn"
    )
    func lifeCycle() async throws {
        try await Self.withBus { bus, loop, journal in
            let first = try await FakeAvahi.start(on: bus, loop: loop)
            let announcer = try await AvahiAnnouncer.start(
                Self.configuration, port: 6053, on: loop, log: journal.logger, bus: bus)
            let running = Task { await announcer.run() }

            try await eventually("the announcement") { first.calls.count >= 3 }
            #expect(first.calls == Self.announced)
            #expect(first.txt.withLock { $0 } == AvahiAnnouncer.txt(Self.configuration))

            try await first.groupState(.established, of: "/Client1/EntryGroup1")
            try await eventually("the announcement logged") {
                journal.logLines.contains { $0.contains("announced by mDNS as _esphomelib._tcp \"kitchen\"") }
            }

            try await first.groupState(.collision, of: "/Client1/EntryGroup1")
            try await eventually("the new name registered") { first.calls.count >= 7 }
            #expect(
                first.calls.dropFirst(3) == [
                    "GetAlternativeServiceName kitchen", "Reset /Client1/EntryGroup1",
                    "AddService kitchen #2 _esphomelib._tcp 6053 /Client1/EntryGroup1", "Commit /Client1/EntryGroup1",
                ])
            #expect(journal.logLines.contains { $0.contains("announcing as \"kitchen #2\" instead") })

            // avahi-daemon restarts: the old one leaves the bus, a new one takes the name.
            await first.connection.close()
            let second = try await FakeAvahi.start(on: bus, loop: loop)
            try await eventually("the announcement to the new daemon") { second.calls.count >= 3 }
            #expect(second.calls == Self.announced)

            await announcer.withdraw()
            await running.value
            #expect(second.calls == Self.announced + ["Free /Client1/EntryGroup1"])
            #expect(first.calls.count == 7)
            await second.connection.close()
        }
    }

    @Test(
        "with no avahi-daemon at the start it warns and announces once one comes; a name another program here holds is refused at once and the alternative registered"
    )
    func lateDaemonAndLocalCollision() async throws {
        try await Self.withBus { bus, loop, journal in
            let announcer = try await AvahiAnnouncer.start(
                Self.configuration, port: 6053, on: loop, log: journal.logger, bus: bus)
            let running = Task { await announcer.run() }
            try await eventually("the warning") {
                journal.logLines.contains { $0.contains("avahi-daemon is not on the system bus") }
            }

            let avahi = try await FakeAvahi.start(on: bus, loop: loop, taken: ["kitchen"])
            try await eventually("the registration") { avahi.calls.count >= 6 }
            #expect(
                avahi.calls == [
                    "EntryGroupNew /Client1/EntryGroup1",
                    "AddService kitchen _esphomelib._tcp 6053 /Client1/EntryGroup1",
                    "GetAlternativeServiceName kitchen", "Reset /Client1/EntryGroup1",
                    "AddService kitchen #2 _esphomelib._tcp 6053 /Client1/EntryGroup1", "Commit /Client1/EntryGroup1",
                ])
            #expect(journal.logLines.contains { $0.contains("another program on this machine announces it") })

            await announcer.withdraw()
            await running.value
            #expect(avahi.calls.last == "Free /Client1/EntryGroup1")
            await avahi.connection.close()
        }
    }
}
