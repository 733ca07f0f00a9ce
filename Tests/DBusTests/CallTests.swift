import DBus
import EventLoop
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
    import TestSupport
#endif

/// An object with an `Echo` method that returns its arguments, whatever their types.
func echoInterface() -> DBusInterface {
    DBusInterface(
        "org.gattway.Test",
        methods: [
            DBusMethod(
                "Echo", in: nil, out: nil, handler: .immediate { call in call.arguments })
        ])
}

/// A value of every type, including nested containers and empty ones.
let everyType: [DBusValue] = [
    .byte(0xFE), .boolean(true), .boolean(false), .int16(-300), .uint16(65000), .int32(-70000), .uint32(4_000_000_000),
    .int64(-5_000_000_000), .uint64(18_000_000_000_000_000_000), .double(-1.5), .string("héllo ✓"), .string(""),
    .objectPath("/org/bluez/hci0"), .signature([.dictionary(key: .string, value: .variant)]),
    .strings(["a", "b"]), .array(.string, []), .bytes([0, 1, 255]), .bytes([]),
    .array(.array(.int32), [.array(.int32, [1, 2]), .array(.int32, [])]),
    .variantDictionary(["Name": "x", "RSSI": .int16(-70), "UUIDs": .strings(["180f"])]),
    .dictionary(key: .string, value: .variant, []),
    .dictionary(key: .uint16, value: .array(.byte), [DBusDictionaryEntry(.uint16(0x004C), .bytes([2, 21]))]),
    .structure([.int32(1), .string("two"), .structure([.double(3)])]),
    .array(.structure([.string, .array(.byte)]), [.structure([.string("k"), .bytes([9])])]),
    .variant(.variant(.int32(7))), .variant(.array(.objectPath, [])),
]

@Suite("Method calls between two connections")
struct CallTests {
    @Test("every D-Bus type survives a round trip through a method call")
    func roundTripEveryType() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            try await server.export([echoInterface()], at: "/echo")
            for value in everyType {
                let reply = try await client.call(
                    destination: server.uniqueName, path: "/echo", interface: "org.gattway.Test", method: "Echo",
                    arguments: [value])
                #expect(reply == [value], "round trip of \(value.type): \(value)")
                #expect(reply.first?.type == value.type)
            }
            // All of them in one message.
            let reply = try await client.call(
                destination: server.uniqueName, path: "/echo", interface: "org.gattway.Test", method: "Echo",
                arguments: everyType)
            #expect(reply == everyType)
            await client.close()
            await server.close()
        }
    }

    @Test("a unix fd sent by one connection is a working duplicate at the other")
    func unixFDRoundTrip() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            try await server.export([echoInterface()], at: "/echo")
            var ends: [Int32] = [-1, -1]
            #expect(pipe(&ends) == 0)
            defer { close(ends[1]) }
            let readEnd = DBusUnixFD(taking: ends[0])
            let reply = try await client.call(
                destination: server.uniqueName, path: "/echo", interface: "org.gattway.Test", method: "Echo",
                arguments: [.unixFD(readEnd), .array(.unixFD, [.unixFD(readEnd)])])
            let received = try #require(reply.first?.unixFD)
            #expect(received.fileDescriptor != readEnd.fileDescriptor)
            #expect(reply.last?.array?.first?.unixFD != nil)
            let message: [UInt8] = Array("ping".utf8)
            #expect(write(ends[1], message, message.count) == 4)
            var buffer = [UInt8](repeating: 0, count: 8)
            let count = read(received.fileDescriptor, &buffer, buffer.count)
            #expect(Array(buffer.prefix(max(0, count))) == message)
            await client.close()
            await server.close()
        }
    }

    @Test("a value that contradicts its own type is a typed error, not a crash")
    func badLocalValue() async throws {
        try await TestBus.run { bus in
            let client = try await bus.connect()
            let bad = DBusValue.array(.string, [.string("ok"), .int32(1)])
            await #expect {
                _ = try await client.call(
                    destination: client.uniqueName, path: "/x", interface: "org.gattway.Test", method: "Echo",
                    arguments: [bad])
            } throws: { error in
                (error as? DBusError)?.name == .invalidArgs
            }
            await #expect {
                try await client.emit(path: "/x", interface: "not an interface", member: "Changed")
            } throws: { error in
                (error as? DBusError)?.name == .invalidArgs
            }
            await #expect {
                try await client.emit(
                    path: "/x", interface: "org.gattway.Test", member: "Changed", arguments: ["nul\u{0}inside"])
            } throws: { error in
                (error as? DBusError)?.name == .invalidArgs
            }
            #expect(await client.isConnected)
            await client.close()
        }
    }

    @Test("arguments of the wrong signature are answered with InvalidArgs")
    func wrongSignature() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            try await server.export(
                [
                    DBusInterface(
                        "org.gattway.Test",
                        methods: [
                            .immediate("Add", in: [.int32, .int32], out: [.int32]) { call in
                                [.int32((call.arguments[0].int32 ?? 0) &+ (call.arguments[1].int32 ?? 0))]
                            }
                        ])
                ], at: "/calc")
            let sum = try await client.call(
                destination: server.uniqueName, path: "/calc", interface: "org.gattway.Test", method: "Add",
                arguments: [2, 3], expecting: [.int32])
            #expect(sum == [5])
            await #expect {
                _ = try await client.call(
                    destination: server.uniqueName, path: "/calc", interface: "org.gattway.Test", method: "Add",
                    arguments: ["two", 3])
            } throws: { error in
                guard let error = error as? DBusError else { return false }
                return error.name == .invalidArgs && error.message.contains("expected i")
            }
            await #expect {
                _ = try await client.call(
                    destination: server.uniqueName, path: "/calc", interface: "org.gattway.Test", method: "Add",
                    arguments: [2, 3], expecting: [.string])
            } throws: { error in
                (error as? DBusError)?.name == .invalidSignature
            }
            await client.close()
            await server.close()
        }
    }

    @Test(
        "error names and messages from a handler reach the caller",
        arguments: [
            DBusError("org.bluez.Error.Failed", "le-connection-abort-by-local"),
            DBusError("org.bluez.Error.NotReady", "Resource Not Ready"),
            DBusError(.accessDenied, "nope"),
        ])
    func errorPropagation(error: DBusError) async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            try await server.export(
                [DBusInterface("org.bluez.Device1", methods: [DBusMethod("Connect") { _ in throw error }])], at: "/dev")
            await #expect(throws: error) {
                _ = try await client.call(
                    destination: server.uniqueName, path: "/dev", interface: "org.bluez.Device1", method: "Connect")
            }
            await client.close()
            await server.close()
        }
    }

    @Test("unknown objects, interfaces and methods get the standard errors")
    func unknownTargets() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            try await server.export([echoInterface()], at: "/echo")
            let cases: [(DBusObjectPath, String, String, DBusError.Name)] = [
                ("/nothing", "org.gattway.Test", "Echo", .unknownObject),
                ("/echo", "org.gattway.Other", "Echo", .unknownInterface),
                ("/echo", "org.gattway.Test", "Missing", .unknownMethod),
            ]
            for (path, interface, method, name) in cases {
                await #expect {
                    _ = try await client.call(
                        destination: server.uniqueName, path: path, interface: interface, method: method)
                } throws: { error in
                    (error as? DBusError)?.name == name
                }
            }
            await client.close()
            await server.close()
        }
    }

    @Test("a call with no reply times out with NoReply, and the loop keeps serving")
    func timeout() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            let held = Locked<[DBusPendingReply]>([])
            try await server.export(
                [
                    DBusInterface(
                        "org.gattway.Test",
                        methods: [
                            .deferred("Hang") { _, reply in held.withLock { $0.append(reply) } },
                            .immediate("Ping", out: [.string]) { _ in ["pong"] },
                        ])
                ], at: "/slow")
            let start = ContinuousClock.now
            await #expect {
                _ = try await client.call(
                    destination: server.uniqueName, path: "/slow", interface: "org.gattway.Test", method: "Hang",
                    timeout: .milliseconds(200))
            } throws: { error in
                (error as? DBusError)?.name == .noReply
            }
            let elapsed = ContinuousClock.now - start
            #expect(elapsed >= .milliseconds(190) && elapsed < .seconds(3))
            let pong = try await client.call(
                destination: server.uniqueName, path: "/slow", interface: "org.gattway.Test", method: "Ping")
            #expect(pong == ["pong"])
            held.withLock { $0.removeAll() }
            await client.close()
            await server.close()
        }
    }

    @Test("a reply sent later, asynchronously, reaches the caller (delayed Connect)")
    func delayedReply() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            let held = Locked<DBusPendingReply?>(nil)
            try await server.export(
                [
                    DBusInterface(
                        "org.bluez.Device1",
                        methods: [
                            DBusMethod("Connect") { _ in
                                try await Task.sleep(for: .milliseconds(150))
                                return []
                            },
                            .deferred("Pair") { _, reply in held.withLock { $0 = reply } },
                        ])
                ], at: "/dev")
            let start = ContinuousClock.now
            let reply = try await client.call(
                destination: server.uniqueName, path: "/dev", interface: "org.bluez.Device1", method: "Connect")
            #expect(reply.isEmpty)
            #expect(ContinuousClock.now - start >= .milliseconds(140))

            let name = server.uniqueName
            let paired = Task {
                try await client.call(destination: name, path: "/dev", interface: "org.bluez.Device1", method: "Pair")
            }
            while held.value == nil { try await Task.sleep(for: .milliseconds(5)) }
            held.value?.fail(DBusError("org.bluez.Error.AuthenticationFailed", "Authentication Failed"))
            held.withLock { $0 = nil }
            await #expect(throws: DBusError("org.bluez.Error.AuthenticationFailed", "Authentication Failed")) {
                _ = try await paired.value
            }
            await client.close()
            await server.close()
        }
    }

    @Test("cancelling the calling task ends a pending call with CancellationError")
    func cancellation() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            let held = Locked<[DBusPendingReply]>([])
            try await server.export(
                [
                    DBusInterface(
                        "org.gattway.Test",
                        methods: [.deferred("Hang") { _, reply in held.withLock { $0.append(reply) } }])
                ],
                at: "/slow")
            let name = server.uniqueName
            let task = Task {
                try await client.call(destination: name, path: "/slow", interface: "org.gattway.Test", method: "Hang")
            }
            while held.value.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
            task.cancel()
            await #expect(throws: CancellationError.self) { _ = try await task.value }
            // A late reply to the cancelled call is dropped without harm.
            held.value.first?.succeed()
            held.withLock { $0.removeAll() }
            #expect(await client.isConnected)
            await client.close()
            await server.close()
        }
    }

    @Test("closing a connection fails its pending calls with Disconnected")
    func closeFailsPending() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            let held = Locked<[DBusPendingReply]>([])
            try await server.export(
                [
                    DBusInterface(
                        "org.gattway.Test",
                        methods: [.deferred("Hang") { _, reply in held.withLock { $0.append(reply) } }])
                ],
                at: "/slow")
            let name = server.uniqueName
            let task = Task {
                try await client.call(destination: name, path: "/slow", interface: "org.gattway.Test", method: "Hang")
            }
            while held.value.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
            await client.close()
            await #expect {
                _ = try await task.value
            } throws: { error in
                (error as? DBusError)?.name == .disconnected
            }
            held.withLock { $0.removeAll() }
            await server.close()
        }
    }

    @Test("an exported method can be called by busctl and gdbus")
    func externalTools() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            try await server.export(
                [
                    DBusInterface(
                        "org.gattway.Test",
                        methods: [
                            .immediate("Greet", in: [.string], out: [.string]) { call in
                                ["hello \(call.arguments[0].string ?? "")"]
                            }
                        ])
                ], at: "/org/gattway/test")
            let busctl = try await ChildProcess.run(
                "busctl",
                [
                    "--address=\(bus.daemon.address)", "call", server.uniqueName, "/org/gattway/test",
                    "org.gattway.Test", "Greet", "s", "busctl",
                ])
            #expect(busctl.status == 0, "\(busctl.output)")
            #expect(busctl.output.contains("s \"hello busctl\""), "\(busctl.output)")
            let gdbus = try await ChildProcess.run(
                "gdbus",
                [
                    "call", "--address", bus.daemon.address, "--dest", server.uniqueName, "--object-path",
                    "/org/gattway/test",
                    "--method", "org.gattway.Test.Greet", "gdbus",
                ])
            #expect(gdbus.status == 0, "\(gdbus.output)")
            #expect(gdbus.output.contains("('hello gdbus',)"), "\(gdbus.output)")
            let introspection = try await ChildProcess.run(
                "gdbus",
                [
                    "introspect", "--address", bus.daemon.address, "--dest", server.uniqueName, "--object-path",
                    "/org/gattway/test",
                ])
            #expect(
                introspection.output.contains("Greet(in  s arg_0") || introspection.output.contains("Greet("),
                "\(introspection.output)")
            let busctlError = try await ChildProcess.run(
                "busctl",
                [
                    "--address=\(bus.daemon.address)", "call", server.uniqueName, "/org/gattway/test",
                    "org.gattway.Test", "Greet", "i", "5",
                ])
            #expect(busctlError.status != 0)
            #expect(busctlError.output.contains("expected s"), "\(busctlError.output)")
            await server.close()
        }
    }
}
