import DBus
import EventLoop
import TestSupport
import Testing

@Suite("Signals and match rules")
struct SignalTests {
    @Test("only signals matching the rule are delivered, in order")
    func matchRules() async throws {
        try await TestBus.run { bus in
            let emitter = try await bus.connect()
            let listener = try await bus.connect()
            let stream = try await listener.signals(
                matching: DBusMatchRule(pathNamespace: "/org/bluez", interface: "org.gattway.Test", member: "Tick"))
            let everything = try await listener.signals(matching: DBusMatchRule(interface: "org.gattway.Test"))
            try await emitter.emit(
                path: "/org/bluez/hci0", interface: "org.gattway.Test", member: "Tick", arguments: [1])
            try await emitter.emit(
                path: "/org/bluez/hci0", interface: "org.gattway.Test", member: "Tock", arguments: [2])
            try await emitter.emit(path: "/elsewhere", interface: "org.gattway.Test", member: "Tick", arguments: [3])
            try await emitter.emit(path: "/org/bluezz", interface: "org.gattway.Test", member: "Tick", arguments: [4])
            try await emitter.emit(path: "/org/bluez", interface: "org.gattway.Other", member: "Tick", arguments: [5])
            try await emitter.emit(
                path: "/org/bluez/hci0/dev_1", interface: "org.gattway.Test", member: "Tick", arguments: [6])
            var iterator = stream.makeAsyncIterator()
            let first = try await next(&iterator)
            #expect(first.arguments == [1])
            #expect(first.sender == emitter.uniqueName)
            #expect(first.path == "/org/bluez/hci0")
            #expect(first.member == "Tick")
            #expect(try await next(&iterator).arguments == [6])
            // The catch-all stream saw all five org.gattway.Test signals, so nothing was lost for it.
            var all = everything.makeAsyncIterator()
            var seen: [DBusValue] = []
            for _ in 0..<5 { seen += try await next(&all).arguments }
            #expect(seen == [1, 2, 3, 4, 6])
            await listener.close()
            await emitter.close()
        }
    }

    @Test(
        "a handler kept off the bus gets only what addMatch's rules bring, once when two of them match, until removeMatch"
    )
    func handlerOffTheBus() async throws {
        try await TestBus.run { bus in
            let emitter = try await bus.connect()
            let listener = try await bus.connect()
            let seen = Locked<[DBusValue]>([])
            let handler = try await listener.handleSignals(
                matching: DBusMatchRule(interface: "org.gattway.Test"), onBus: false
            ) { message in
                seen.withLock { $0 += message.arguments }
            }
            let narrow = DBusMatchRule(pathNamespace: "/dev", interface: "org.gattway.Test")
            try await listener.addMatch(DBusMatchRule(path: "/dev/a", interface: "org.gattway.Test"))
            try await listener.addMatch(narrow)
            try await emitter.emit(path: "/other", interface: "org.gattway.Test", member: "Tick", arguments: [1])
            try await emitter.emit(path: "/dev/a", interface: "org.gattway.Test", member: "Tick", arguments: [2])
            try await emitter.emit(path: "/dev/b", interface: "org.gattway.Test", member: "Tick", arguments: [3])
            try await eventually("two signals") { seen.value.count >= 2 }
            await listener.removeMatch(narrow)
            _ = try await listener.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                method: "GetId")  // the RemoveMatch is applied before this is answered
            try await emitter.emit(path: "/dev/b", interface: "org.gattway.Test", member: "Tick", arguments: [4])
            try await emitter.emit(path: "/dev/a", interface: "org.gattway.Test", member: "Tick", arguments: [5])
            try await eventually("the last signal") { seen.value.count >= 3 }
            #expect(seen.value == [2, 3, 5])
            handler.cancel()
            await listener.close()
            await emitter.close()
        }
    }

    @Test("handleSignals: a signal sent before a reply has been handled when the call returns; cancel stops it")
    func handlerOrderedWithReplies() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            let counter = Locked(0)
            try await server.export(
                [
                    DBusInterface(
                        "org.gattway.Test",
                        methods: [
                            DBusMethod("Read") { _ in
                                counter.withLock { $0 += 1 }
                                try await server.emit(
                                    path: "/dev", interface: "org.gattway.Test", member: "Changed",
                                    arguments: [.uint32(UInt32(counter.value))])
                                return []
                            }
                        ])
                ], at: "/dev")
            let (seen, handler) = try await Self.collectChanged(client, from: server)
            for round in 1...50 {
                _ = try await client.call(
                    destination: server.uniqueName, path: "/dev", interface: "org.gattway.Test", method: "Read")
                #expect(seen.value.last == .uint32(UInt32(round)), "the signal of round \(round) before its reply")
            }
            handler.cancel()
            handler.cancel()
            try await server.emit(
                path: "/dev", interface: "org.gattway.Test", member: "Changed", arguments: [.uint32(0)])
            _ = try await client.call(
                destination: server.uniqueName, path: "/dev", interface: "org.gattway.Test", method: "Read")
            #expect(seen.value.count == 50, "nothing after cancel()")
            await client.close()
            await server.close()
        }
    }

    @Test("handleSignals: a signal sent after a reply is not handled before a caller on the loop resumes")
    func handlerNotAheadOfReplies() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            let counter = Locked(0)
            // The reply and the signal after it leave the server in one loop turn, so the client
            // usually reads both at once: the signal must still wait for the caller of the reply
            // (a snapshot read by that call would otherwise be older than a change already seen).
            try await server.export(
                [
                    DBusInterface(
                        "org.gattway.Test",
                        methods: [
                            DBusMethod(
                                "Read", out: nil,
                                handler: .immediate { _ in
                                    let round = counter.withLock {
                                        $0 += 1
                                        return $0
                                    }
                                    server.loop.execute {
                                        server.assumeIsolated {
                                            try? $0.emit(
                                                path: "/dev", interface: "org.gattway.Test", member: "Changed",
                                                arguments: [.uint32(UInt32(round))])
                                        }
                                    }
                                    return [.uint32(UInt32(round))]
                                })
                        ])
                ], at: "/dev")
            let (seen, handler) = try await Self.collectChanged(client, from: server)
            let caller = LoopCaller(loop: bus.loop)
            for round in 1...50 {
                let before = await caller.call(client, server.uniqueName, seen)
                #expect(before.reply == [.uint32(UInt32(round))])
                #expect(!before.seen.contains(.uint32(UInt32(round))), "the signal of round \(round) after its reply")
            }
            // Every signal still arrives.
            for _ in 0..<500 where seen.value.count < 50 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(seen.value == (1...50).map { .uint32(UInt32($0)) })
            handler.cancel()
            await client.close()
            await server.close()
        }
    }

    /// The arguments of `server`'s `Changed` signals, collected by a `handleSignals` handler on `client`.
    static func collectChanged(_ client: DBusConnection, from server: DBusConnection) async throws -> (
        Locked<[DBusValue]>, DBusSignalHandler
    ) {
        let seen = Locked<[DBusValue]>([])
        let handler = try await client.handleSignals(
            matching: DBusMatchRule(sender: server.uniqueName, member: "Changed")
        ) { message in
            seen.withLock { $0 += message.arguments }
        }
        return (seen, handler)
    }

    @Test("argument and sender rules select signals")
    func argumentAndSenderRules() async throws {
        try await TestBus.run { bus in
            let a = try await bus.connect()
            let b = try await bus.connect()
            let listener = try await bus.connect()
            let fromB = try await listener.signals(matching: DBusMatchRule(sender: b.uniqueName, member: "Ping"))
            let arg0 = try await listener.signals(
                matching: DBusMatchRule(member: "Ping", arguments: [0: "org.bluez.Device1"]))
            try await a.emit(
                path: "/a", interface: "org.gattway.Test", member: "Ping", arguments: ["org.bluez.Device1"])
            try await b.emit(
                path: "/b", interface: "org.gattway.Test", member: "Ping", arguments: ["org.bluez.Adapter1"])
            try await b.emit(
                path: "/b", interface: "org.gattway.Test", member: "Ping", arguments: ["org.bluez.Device1"])
            var fromBIterator = fromB.makeAsyncIterator()
            #expect(try await next(&fromBIterator).arguments == ["org.bluez.Adapter1"])
            #expect(try await next(&fromBIterator).arguments == ["org.bluez.Device1"])
            var arg0Iterator = arg0.makeAsyncIterator()
            #expect(try await next(&arg0Iterator).sender == a.uniqueName)
            #expect(try await next(&arg0Iterator).sender == b.uniqueName)
            for connection in [a, b, listener] { await connection.close() }
        }
    }

    @Test("a well-known sender rule follows the name's current owner, even beside a catch-all rule")
    func wellKnownSender() async throws {
        try await TestBus.run { bus in
            let owner = try await bus.connect()
            let other = try await bus.connect()
            let listener = try await bus.connect()
            #expect(try await owner.requestName("org.gattway.Owner") == .primaryOwner)
            let fromName = try await listener.signals(
                matching: DBusMatchRule(sender: "org.gattway.Owner", member: "Ping"))
            let everything = try await listener.signals(matching: DBusMatchRule(member: "Ping"))
            var catchAll = everything.makeAsyncIterator()
            try await other.emit(path: "/o", interface: "org.gattway.Test", member: "Ping", arguments: ["other"])
            try await owner.emit(path: "/o", interface: "org.gattway.Test", member: "Ping", arguments: ["owner"])
            _ = try await next(&catchAll)
            _ = try await next(&catchAll)
            var iterator = fromName.makeAsyncIterator()
            #expect(try await next(&iterator).arguments == ["owner"])
            // The name moves to `other`: now its signals match.
            #expect(try await owner.releaseName("org.gattway.Owner") == .released)
            #expect(try await other.requestName("org.gattway.Owner") == .primaryOwner)
            try await owner.emit(path: "/o", interface: "org.gattway.Test", member: "Ping", arguments: ["old owner"])
            try await other.emit(path: "/o", interface: "org.gattway.Test", member: "Ping", arguments: ["new owner"])
            #expect(try await next(&iterator).arguments == ["new owner"])
            for connection in [owner, other, listener] { await connection.close() }
        }
    }

    @Test("ending a stream removes its match rule from the bus")
    func streamEndRemovesMatch() async throws {
        try await TestBus.run { bus in
            let listener = try await bus.connect()
            let probe = try await bus.connect()
            func ruleCount() async throws -> Int {
                // Debian's dbus-daemon is built with org.freedesktop.DBus.Debug.Stats, which counts rules.
                let output = try await ChildProcess.run(
                    "busctl",
                    [
                        "--address=\(bus.daemon.address)", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                        "org.freedesktop.DBus.Debug.Stats", "GetConnectionStats", "s", listener.uniqueName,
                    ])
                guard output.status == 0, let range = output.output.range(of: "\"MatchRules\" u ") else { return -1 }
                return Int(output.output[range.upperBound...].prefix { $0.isNumber }) ?? -1
            }
            let before = try await ruleCount()
            var stream: AsyncStream<DBusMessage>? = try await listener.signals(
                matching: DBusMatchRule(member: "Nothing"))
            let during = try await ruleCount()
            stream = nil
            _ = stream
            var after = try await ruleCount()
            for _ in 0..<100 where after != before {
                try await Task.sleep(for: .milliseconds(10))
                after = try await ruleCount()
            }
            #expect(before >= 0, "Debug.Stats unavailable")
            #expect(during == before + 1)
            #expect(after == before)
            await probe.close()
            await listener.close()
        }
    }

    @Test("closing the connection finishes its signal streams")
    func closeFinishesStreams() async throws {
        try await TestBus.run { bus in
            let listener = try await bus.connect()
            let stream = try await listener.signals(matching: DBusMatchRule(member: "Never"))
            await listener.close()
            var iterator = stream.makeAsyncIterator()
            let element = await iterator.next()
            #expect(element == nil)
        }
    }
}

/// An actor on the test loop: code after its `await`s runs as a job of that loop, as the
/// central manager's does.
actor LoopCaller {
    let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    init(loop: EventLoop) { self.loop = loop }

    /// Calls `Read` and returns its reply with the signals handled by the time the call returned.
    func call(_ client: DBusConnection, _ server: String, _ seen: Locked<[DBusValue]>) async -> (
        reply: [DBusValue], seen: [DBusValue]
    ) {
        let reply = try? await client.call(
            destination: server, path: "/dev", interface: "org.gattway.Test", method: "Read")
        return (reply ?? [], seen.value)
    }
}
