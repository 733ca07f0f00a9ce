import BlueZSimulator
import DBus
import EventLoop
import Foundation

/// `gattway-bench run simulator`: notifications/s the BlueZ simulator emits in burst mode
/// (control interface `Burst`, rate 0) as `PropertiesChanged(Value)`, and how many a minimal
/// StartNotify client on another connection and loop thread receives, through a private dbus-daemon.
enum SimulatorBench: BenchSuite {
    static let name = "simulator"
    static let count = 100_000
    static let scenario = """
        {"timing": {"disconnect_delay": "10ms", "resolve_delay": 0, "gatt_latency": 0},
         "devices": [{"address": "A4:C1:38:00:00:01", "interval": "10ms", "service_uuids": ["180F"],
           "gatt": [{"uuid": "180F", "characteristics": [{"uuid": "2A19", "flags": ["read", "notify"], "value": {"hex": "64"}}]}]}]}
        """

    static func run() async throws -> [BenchRow] {
        let daemon = try BenchDBusDaemon()
        defer { daemon.stop() }
        let simulatorLoop = EventLoop(name: "bench-simulator")
        let clientLoop = EventLoop(name: "bench-client")
        defer {
            simulatorLoop.shutdown()
            clientLoop.shutdown()
        }
        let simulator = try await BlueZSimulator.start(
            scenario: try Scenario.parse(Data(scenario.utf8)), bus: .address(daemon.address), on: simulatorLoop)
        let client = try await DBusConnection.connect(to: .address(daemon.address), on: clientLoop)
        let device: DBusObjectPath = "/org/bluez/hci0/dev_A4_C1_38_00_00_01"
        let level: DBusObjectPath = "/org/bluez/hci0/dev_A4_C1_38_00_00_01/service000a/char000b"
        @discardableResult
        func call(_ path: DBusObjectPath, _ interface: String, _ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
            try await client.call(destination: "org.bluez", path: path, interface: interface, method: method, arguments: arguments)
        }
        try await call("/org/bluez/hci0", "org.bluez.Adapter1", "StartDiscovery")
        for _ in 0..<500 {
            if (try? await call(device, "org.freedesktop.DBus.Properties", "Get", ["org.bluez.Device1", "Address"])) != nil { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        try await call(device, "org.bluez.Device1", "Connect")
        for _ in 0..<500 {
            let resolved = try? await call(device, "org.freedesktop.DBus.Properties", "Get", ["org.bluez.Device1", "ServicesResolved"])
            if resolved?.first?.bool == true { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        let signals = try await client.signals(
            matching: DBusMatchRule(sender: "org.bluez", path: level, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged"))
        try await call(level, "org.bluez.GattCharacteristic1", "StartNotify")
        let started = Date()
        try await call(BlueZSimulator.controlPath, BlueZSimulator.controlInterface, "Burst", [
            "A4:C1:38:00:00:01", "2A19", .uint32(UInt32(count)), .double(0),
        ])
        let received = try await DBusBench.withTimeout(seconds: 60) {
            var received = 0
            for await message in signals where message.arguments.count > 1 && message.arguments[1]["Value"] != nil {
                received += 1
                if received == count { break }
            }
            return received
        } ?? 0
        let clientSeconds = Date().timeIntervalSince(started)
        let counters = await simulator.counterValues()
        await simulator.stop()
        await client.close()
        let emitRate = counters.lastBurstSeconds > 0 ? Double(counters.lastBurstCount) / counters.lastBurstSeconds : 0
        return [
            BenchRow(
                name: "simulator burst: notifications emitted", value: emitRate, unit: "notifications/s", target: "≥ 20000",
                detail: "\(counters.lastBurstCount) PropertiesChanged(Value) from the simulator's loop, batched per turn"),
            BenchRow(
                name: "simulator burst: received by a StartNotify client", value: Double(received) / clientSeconds,
                unit: "notifications/s",
                detail: "\(received)/\(count) via dbus-daemon to a second connection on its own loop thread"),
        ]
    }
}
