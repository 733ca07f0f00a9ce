import DBus
import EventLoop
import Foundation
import TestSupport

/// D-Bus throughput through a private dbus-daemon: PropertiesChanged-shaped signals received by our
/// client from a second process (`gattway-bench child dbus-emitter ADDRESS COUNT`), and signals our
/// connection emits; and, without a bus, the CPU time of decoding one advertisement report.
enum DBusBench: BenchSuite {
    static let name = "dbus"
    static let receiveCount = 200_000
    static let emitCount = 200_000

    static func run() async throws -> [BenchRow] {
        var rows: [BenchRow] = [try decodeRow()]
        let daemon = try await DBusDaemon()
        defer { daemon.stop() }
        let loop = EventLoop(name: "bench-dbus")
        defer { loop.shutdown() }

        // 1. Receive from a second process.
        let client = try await DBusConnection.connect(to: .address(daemon.address), on: loop)
        let stream = try await client.signals(
            matching: DBusMatchRule(
                pathNamespace: "/org/bluez", interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged"))
        let emitter = Process()
        emitter.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        emitter.arguments = ["child", "dbus-emitter", daemon.address, String(receiveCount)]
        try emitter.run()
        var received = 0
        var first: ContinuousClock.Instant? = nil
        var last = ContinuousClock.now
        var checksum = 0
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            await client.close()  // finishes the stream if signals were lost
        }
        for await signal in stream {
            if first == nil { first = .now }
            checksum &+= signal.arguments[1]["RSSI"]?.int ?? 0
            received += 1
            if received == receiveCount {
                last = .now
                break
            }
        }
        watchdog.cancel()
        emitter.waitUntilExit()
        let seconds = first.map { (last - $0).seconds } ?? 0
        rows.append(
            BenchRow(
                name: "D-Bus signals received from a second process",
                value: seconds > 0 ? Double(received - 1) / seconds : 0,
                unit: "signals/s", target: "≥ 20000",
                detail:
                    "\(received)/\(receiveCount) PropertiesChanged (sa{sv}as, RSSI + ManufacturerData) via dbus-daemon, decoded into DBusValue, AsyncStream consumer (checksum \(checksum))"
            ))

        // 2. Emit from our connection, with a second connection of ours receiving them all.
        let receiver = try await DBusConnection.connect(to: .address(daemon.address), on: loop)
        let sink = try await receiver.signals(
            matching: DBusMatchRule(sender: client.uniqueName, member: "PropertiesChanged"))
        let start = ContinuousClock.now
        let counter = Task {
            var n = 0
            for await _ in sink {
                n += 1
                if n == emitCount { break }
            }
            return (n, ContinuousClock.now)
        }
        try await emitSignals(on: client, count: emitCount)
        let emitted = ContinuousClock.now
        try await client.flush()
        let written = ContinuousClock.now
        let receivedBack = try await withTimeout(seconds: 60) { await counter.value }
        rows.append(
            BenchRow(
                name: "D-Bus signals emitted by our connection", value: Double(emitCount) / (written - start).seconds,
                unit: "signals/s", target: "≥ 20000",
                detail:
                    "\(emitCount) PropertiesChanged built + sent + written to the socket (emit loop alone: \(Int(Double(emitCount) / (emitted - start).seconds))/s)"
            ))
        if let (count, end) = receivedBack {
            rows.append(
                BenchRow(
                    name: "D-Bus signals emitted and received in one process",
                    value: Double(count) / (end - start).seconds,
                    unit: "signals/s",
                    detail: "\(count)/\(emitCount) through dbus-daemon to a second connection on the same loop"))
        }
        await receiver.close()
        await client.close()
        return rows
    }

    /// Decoding alone, no bus: the advertisement report bluetoothd sends for an ATC1441 sensor
    /// (`PropertiesChanged` of `Device1`: RSSI and 13 bytes of service data) demarshalled (libdbus
    /// validates it, as on receipt) and decoded into a `DBusMessage`, over and over.
    static func decodeRow() throws -> BenchRow {
        let serviceData = DBusValue.dictionary(
            key: .string, value: .variant,
            [
                DBusDictionaryEntry(
                    .string("0000181a-0000-1000-8000-00805f9b34fb"),
                    .variant(.bytes([0xA4, 0xC1, 0x38, 0x5A, 0x00, 0x00, 0x00, 0xD2, 0x28, 0x5A, 0x0B, 0xB8, 0x01])))
            ])
        let changed = DBusValue.variantDictionary([("RSSI", .int16(-60)), ("ServiceData", serviceData)])
        let wire = try DBusMessage.wire(["org.bluez.Device1", changed, .array(.string, [])])
        let count = 200_000
        var checksum = 0
        let start = ContinuousClock.now
        for _ in 0..<count { checksum &+= try DBusMessage.decode(wire: wire).arguments.count }
        let seconds = (ContinuousClock.now - start).seconds
        return BenchRow(
            name: "D-Bus advertisement report demarshalled and decoded", value: seconds / Double(count) * 1e9,
            unit: "ns/signal",
            detail: "PropertiesChanged(Device1, {RSSI, ServiceData}, []), \(wire.count) bytes, through "
                + "dbus_message_demarshal and DBusMessage(copying:), \(count) times, no bus (checksum \(checksum))")
    }

    static func child(_ arguments: [String]) async throws -> Bool {
        guard arguments.first == "dbus-emitter" else { return false }
        guard arguments.count == 3, let count = Int(arguments[2]) else {
            FileHandle.standardError.write(Data("usage: gattway-bench child dbus-emitter ADDRESS COUNT\n".utf8))
            exit(64)
        }
        let loop = EventLoop(name: "bench-dbus-emitter")
        let connection = try await DBusConnection.connect(to: .address(arguments[1]), on: loop)
        try await emitSignals(on: connection, count: count)
        try await connection.flush()
        await connection.close()
        loop.shutdown()
        return true
    }

    /// Emits `count` PropertiesChanged signals in bursts, waiting while more than 1 MiB is queued.
    static func emitSignals(on connection: DBusConnection, count: Int) async throws {
        var sent = 0
        while sent < count {
            let burst = min(512, count - sent)
            try await connection.emitPropertiesChangedBurst(from: sent, count: burst)
            sent += burst
            while await connection.outgoingQueueSize > 1 << 20 {
                try await Task.sleep(for: .microseconds(200))
            }
        }
    }

    static func withTimeout<T: Sendable>(seconds: Double, _ body: @escaping @Sendable () async -> T) async throws -> T?
    {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }
}

extension DBusConnection {
    /// Runs on the connection's loop: a burst of BlueZ-shaped PropertiesChanged signals without a
    /// hop per signal.
    fileprivate func emitPropertiesChangedBurst(from start: Int, count: Int) throws {
        for index in start..<(start + count) {
            try emit(
                path: "/org/bluez/hci0/dev_A4_C1_38_0B_12_34", interface: "org.freedesktop.DBus.Properties",
                member: "PropertiesChanged",
                arguments: [
                    "org.bluez.Device1",
                    .variantDictionary([
                        ("RSSI", .int16(Int16(-40 - index % 50))),
                        (
                            "ManufacturerData",
                            .dictionary(
                                key: .uint16, value: .variant,
                                [
                                    DBusDictionaryEntry(
                                        .uint16(0x0001), .variant(.bytes([1, 2, 3, 4, 5, 6, UInt8(index & 0xFF)])))
                                ])
                        ),
                    ]),
                    .array(.string, []),
                ])
        }
    }
}

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
