import BlueZSimulator
import Bluetooth
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
        let world = try await SimulatedWorld(scenario: scenario)
        let result = try await burstIntoMinimalClient(
            world: world, addresses: ["A4:C1:38:00:00:01"], uuid: "2A19", countPerDevice: count)
        await world.stop()
        return [
            BenchRow(
                name: "simulator burst: notifications emitted", value: result.emitRate, unit: "notifications/s",
                target: "≥ 20000",
                detail: "\(result.emitted) PropertiesChanged(Value) from the simulator's loop, batched per turn"),
            BenchRow(
                name: "simulator burst: received by a StartNotify client", value: result.receiveRate,
                unit: "notifications/s",
                detail: "\(result.received)/\(count) via dbus-daemon to a second connection on its own loop thread"),
        ]
    }

    struct BurstResult {
        /// Notifications the simulator emitted, and their rate (simulator's own clock).
        var emitted: Int
        var emitRate: Double
        /// Notifications the minimal client received, and their rate (Burst call → last receipt).
        var received: Int
        var receiveRate: Double
    }

    /// The D-Bus ceiling: a minimal client (one libdbus connection on its own loop thread,
    /// signals decoded into `DBusValue`, nothing else) connects the devices, subscribes
    /// (StartNotify) to `uuid` on each, and counts the `Value` signals of a rate-0 burst of
    /// `countPerDevice` on every device at once.
    static func burstIntoMinimalClient(world: SimulatedWorld, addresses: [String], uuid: String, countPerDevice: Int)
        async throws -> BurstResult
    {
        let clientLoop = EventLoop(name: "bench-client")
        defer { clientLoop.shutdown() }
        let simulator = world.simulator
        let client = try await DBusConnection.connect(to: .address(world.daemon.address), on: clientLoop)
        @discardableResult
        func call(_ path: DBusObjectPath, _ interface: String, _ method: String, _ arguments: [DBusValue] = [])
            async throws -> [DBusValue]
        {
            try await client.call(
                destination: "org.bluez", path: path, interface: interface, method: method, arguments: arguments)
        }
        let signals = try await client.signals(
            matching: DBusMatchRule(
                sender: "org.bluez", pathNamespace: "/org/bluez/hci0", interface: "org.freedesktop.DBus.Properties",
                member: "PropertiesChanged"))
        try await call("/org/bluez/hci0", "org.bluez.Adapter1", "StartDiscovery")
        for address in addresses {
            let device = DBusObjectPath(
                rawValue: "/org/bluez/hci0/dev_" + address.replacingOccurrences(of: ":", with: "_"))!
            for _ in 0..<500 {
                if (try? await call(device, "org.freedesktop.DBus.Properties", "Get", ["org.bluez.Device1", "Address"]))
                    != nil
                {
                    break
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            try await call(device, "org.bluez.Device1", "Connect")
            for _ in 0..<500 {
                let resolved = try? await call(
                    device, "org.freedesktop.DBus.Properties", "Get", ["org.bluez.Device1", "ServicesResolved"])
                if resolved?.first?.bool == true { break }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        try await call("/org/bluez/hci0", "org.bluez.Adapter1", "StopDiscovery")
        // StartNotify on the characteristic `uuid` of every device, found through ObjectManager.
        let objects = try await client.call(
            destination: "org.bluez", path: "/", interface: "org.freedesktop.DBus.ObjectManager",
            method: "GetManagedObjects")
        var characteristics: [DBusObjectPath] = []
        let wanted = BluetoothUUID(uuid)
        for entry in objects.first?.entries ?? [] {
            guard let path = entry.key.objectPath,
                let uuidText = entry.value["org.bluez.GattCharacteristic1"]?["UUID"]?.string,
                BluetoothUUID(uuidText) == wanted
            else { continue }
            characteristics.append(path)
        }
        guard characteristics.count == addresses.count else {
            throw BenchError("found \(characteristics.count) \(uuid) characteristics for \(addresses.count) devices")
        }
        for path in characteristics { try await call(path, "org.bluez.GattCharacteristic1", "StartNotify") }
        let before = await simulator.counterValues().notifications
        let total = countPerDevice * addresses.count
        let started = Date()
        for address in addresses {
            try await simulator.burst(address: address, uuid: uuid, count: countPerDevice, rate: 0)
        }
        let received =
            try await DBusBench.withTimeout(seconds: 60) {
                var received = 0
                for await message in signals where message.arguments.count > 1 && message.arguments[1]["Value"] != nil {
                    received += 1
                    if received == total { break }
                }
                return received
            } ?? 0
        let clientSeconds = Date().timeIntervalSince(started)
        let counters = await simulator.counterValues()
        await client.close()
        let emitted = counters.notifications - before
        let emitSeconds = counters.lastBurstSeconds
        return BurstResult(
            emitted: emitted, emitRate: emitSeconds > 0 ? Double(emitted) / emitSeconds : 0,
            received: received, receiveRate: Double(received) / clientSeconds)
    }
}
