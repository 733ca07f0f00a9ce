import BlueZSimulator
import DBus
import EventLoop
import Foundation
import Synchronization
import TestSupport

/// A private dbus-daemon, an event loop, a running simulator and helpers for a client that talks
/// to it like a BlueZ client. `run` always stops everything.
struct SimulatorHarness {
    let daemon: DBusDaemon
    let loop: EventLoop
    let simulator: BlueZSimulator
    /// The management protocol's socket (`run(_:managementSocket: true)`), in the daemon's directory.
    let managementSocket: String?

    /// - Parameter managementSocket: the simulator also serves the kernel's management protocol,
    ///   at ``managementSocket`` (`mgmt` in the test's scratch directory).
    static func run(
        _ json: String, managementSocket: Bool = false, _ body: (SimulatorHarness) async throws -> Void
    ) async throws {
        let scenario = try Scenario.parse(Data(json.utf8))
        let daemon = try await DBusDaemon()
        let loop = EventLoop(name: "sim-test")
        let socketPath = managementSocket ? daemon.directory.appendingPathComponent("mgmt").path : nil
        do {
            let simulator = try await BlueZSimulator.start(
                scenario: scenario, bus: .address(daemon.address), on: loop, managementSocket: socketPath)
            try await body(
                SimulatorHarness(daemon: daemon, loop: loop, simulator: simulator, managementSocket: socketPath))
            await simulator.stop()
        } catch {
            loop.shutdown()
            daemon.stop()
            throw error
        }
        loop.shutdown()
        daemon.stop()
    }

    func client() async throws -> Client {
        Client(connection: try await DBusConnection.connect(to: .address(daemon.address), on: loop))
    }
}

/// A BlueZ client on its own connection.
struct Client {
    let connection: DBusConnection

    @discardableResult
    func call(_ path: String, _ interface: String, _ method: String, _ arguments: [DBusValue] = []) async throws
        -> [DBusValue]
    {
        try await connection.call(
            destination: "org.bluez", path: try DBusObjectPath(path), interface: interface, method: method,
            arguments: arguments,
            timeout: .seconds(30))
    }

    func get(_ path: String, _ interface: String, _ name: String) async throws -> DBusValue? {
        try await call(path, "org.freedesktop.DBus.Properties", "Get", [.string(interface), .string(name)]).first?
            .unwrapped
    }

    func managedObjects() async throws -> [String: DBusValue] {
        try await call("/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects").first?.dictionary ?? [:]
    }

    /// Every signal from org.bluez, in order.
    func signals() async throws -> SignalLog {
        let stream = try await connection.signals(matching: DBusMatchRule(sender: "org.bluez"))
        return SignalLog(stream)
    }

    @discardableResult
    func control(_ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await call("/io/gattway/Simulator", "io.gattway.Simulator1", method, arguments)
    }

    func close() async { await connection.close() }

    static let adapter = "org.bluez.Adapter1"
    static let device = "org.bluez.Device1"
    static let characteristic = "org.bluez.GattCharacteristic1"
    static let descriptor = "org.bluez.GattDescriptor1"
    static let emptyOptions = DBusValue.dictionary(key: .string, value: .variant, [])
}

/// Collects signals in the background so a test can wait for one matching a condition.
final class SignalLog: Sendable {
    private let received: Box
    private let task: Task<Void, Never>

    final class Box: Sendable {
        let mutex = Mutex<[DBusMessage]>([])
        func withLock<R>(_ body: (inout [DBusMessage]) -> R) -> R { mutex.withLock { body(&$0) } }
    }

    init(_ stream: AsyncStream<DBusMessage>) {
        let received = Box()
        self.received = received
        task = Task {
            for await message in stream { received.withLock { $0.append(message) } }
        }
    }

    deinit { task.cancel() }

    var all: [DBusMessage] { received.withLock { $0 } }

    /// Waits (polling every 5 ms) until some signal satisfies `predicate`; returns it.
    @discardableResult
    func wait(
        for what: String, within seconds: Double = defaultWait, _ predicate: @Sendable (DBusMessage) -> Bool
    ) async throws -> DBusMessage {
        if let match = try await poll(within: seconds, { all.first(where: predicate) }) { return match }
        throw HarnessTimeout(
            description: "no signal \(what) within \(seconds) s; got:\n"
                + all.map(\.description).joined(separator: "\n"))
    }
}

struct HarnessTimeout: Error, CustomStringConvertible {
    var description: String
}

extension DBusMessage {
    /// For PropertiesChanged: the changed dictionary.
    var changed: [String: DBusValue] { arguments.count > 1 ? arguments[1].dictionary ?? [:] : [:] }
    var invalidated: [String] { arguments.count > 2 ? arguments[2].strings ?? [] : [] }
    func isPropertiesChanged(_ path: String, _ interface: String) -> Bool {
        member == "PropertiesChanged" && self.path?.rawValue == path && arguments.first?.string == interface
    }
    func isInterfacesAdded(_ path: String) -> Bool {
        member == "InterfacesAdded" && arguments.first?.objectPath?.rawValue == path
    }
}

/// Polls `condition` every 5 ms until true or `seconds` pass.
func eventually(_ what: String, within seconds: Double = defaultWait, _ condition: () async throws -> Bool) async throws
{
    if try await poll(within: seconds, { try await condition() ? true : nil }) != nil { return }
    throw HarnessTimeout(description: "\(what) did not happen within \(seconds) s")
}

/// Polls `check` every 5 ms until it returns a value; nil when `seconds` passed. It checks once
/// more at the deadline, so a task that got no thread for a while (the suite shares two cores)
/// does not fail on something that did happen.
func poll<T>(within seconds: Double, _ check: () async throws -> T?) async throws -> T? {
    let deadline = Date().addingTimeInterval(seconds)
    while true {
        if let value = try await check() { return value }
        if Date() >= deadline { return nil }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// Scenarios for the tests: fast timings.
enum TestScenarios {
    /// BlueZ's own 30 s TemporaryTimeout, so a device found by a scan is still there when a test
    /// connects on a loaded machine; a test about expiry sets its own (``timing(temporaryTimeout:)``).
    static let timing = timing(temporaryTimeout: "30s")

    static func timing(temporaryTimeout: String) -> String {
        #""timing": {"disconnect_delay": "50ms", "temporary_timeout": "\#(temporaryTimeout)", "resolve_delay": "10ms", "gatt_latency": 0}"#
    }

    static let sensors = """
        {
          \(timing),
          "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}],
          "devices": [
            {"address": "A4:C1:38:00:00:01", "name": "Battery Sensor", "rssi": -58, "interval": "20ms", "service_uuids": ["180F"],
             "manufacturer_data": {"0xffff": {"hex": "52425a31"}}, "service_data": {"180F": {"hex": "64"}},
             "gatt": [{"uuid": "180F", "characteristics": [
                {"uuid": "2A19", "flags": ["read", "notify"], "value": {"number": 94, "format": "u8"},
                 "notify": {"every": "20ms", "value": {"number": {"counter": {"start": 93, "step": -1, "min": 0, "max": 100}}, "format": "u8"}},
                 "descriptors": [{"uuid": "2901", "value": {"utf8": "Level"}}]}]},
               {"uuid": "ff00", "characteristics": [
                {"uuid": "ff01", "flags": ["write", "write-without-response"], "reflect_writes_to": "ff02"},
                {"uuid": "ff02", "flags": ["read", "notify"], "value": {"hex": "00"}},
                {"uuid": "ff03", "flags": ["read"], "read_error": 128},
                {"uuid": "ff04", "flags": ["write"], "write_error": 13},
                {"uuid": "ff05", "flags": ["read"], "value": {"utf8": "hello world"}}]}]},
            {"address": "A4:C1:38:00:00:06", "name": "HR Strap", "rssi": -61, "interval": "20ms", "service_uuids": ["180D"]},
            {"address": "A4:C1:38:00:00:07", "rssi": -70, "interval": "20ms", "connectable": false, "discoverable": false,
             "service_data": {"FCD2": {"template": "bthome_v2"}}}
          ]
        }
        """

    static let battery = "/org/bluez/hci0/dev_A4_C1_38_00_00_01"
    static let heartRate = "/org/bluez/hci0/dev_A4_C1_38_00_00_06"
    static let beacon = "/org/bluez/hci0/dev_A4_C1_38_00_00_07"
}
