import BlueZ
import BlueZSimulator
import Bluetooth
import DBus
import EventLoop
import Foundation
import Synchronization
import TestSupport
import Testing

/// Which of bluetoothd's signals the bus sends the central on each report path
/// (Sources/BlueZ/BlueZMatchRules.swift, docs/bluez.md §7.2), with the simulator's bluetoothd on a
/// real dbus-daemon and its management socket as the kernel's.
@Suite("BlueZ match rules")
struct MatchRuleTests {
    static let everything = "type='signal',sender='org.bluez'"
    static let objectManager =
        "type='signal',sender='org.bluez',path='/',interface='org.freedesktop.DBus.ObjectManager'"
    static let adapters =
        "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',arg0='org.bluez.Adapter1'"
    static let battery = "type='signal',sender='org.bluez',path_namespace='/org/bluez/hci0/dev_A4_C1_38_00_00_01'"

    /// Every rule of every connection on the bus (dbus-daemon's `Debug.Stats.GetAllMatchRules`).
    static func busRules(_ harness: CentralHarness) async throws -> [String] {
        let output = try await ChildProcess.run(
            "busctl",
            [
                "--address=\(harness.daemon.address)", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                "org.freedesktop.DBus.Debug.Stats", "GetAllMatchRules",
            ])
        #expect(output.status == 0, "Debug.Stats.GetAllMatchRules: \(output.output)")
        // `a{sas} N ":1.2" 3 "rule" "rule" …`: the quoted strings that are rules, apostrophes
        // escaped, in the daemon's order of fields (made comparable by ``normalized(_:)``).
        let text = output.output.replacingOccurrences(of: "\\'", with: "'")
        return text.split(separator: "\"").map(String.init).filter { $0.hasPrefix("type=") }.map(normalized)
    }

    /// A rule with its fields sorted (no value here holds a comma).
    static func normalized(_ rule: String) -> String {
        rule.split(separator: ",").sorted().joined(separator: ",")
    }

    /// Waits until the bus holds exactly `expected` of the rules about `org.bluez`.
    static func expectBusRules(_ harness: CentralHarness, _ expected: [String], _ what: String) async throws {
        let last = Mutex<[String]>([])
        do {
            try await eventually(what) {
                let rules = try await busRules(harness).filter { $0.contains("sender='org.bluez'") }.sorted()
                last.withLock { $0 = rules }
                return rules == expected.map(normalized).sorted()
            }
        } catch {
            Issue.record("\(what): the bus has \(last.withLock { $0 })")
            throw error
        }
    }

    /// A central on the harness whose scans read the simulator's management socket.
    static func kernelCentral(
        _ harness: CentralHarness, configure: (inout CentralOptions) -> Void = { _ in }
    ) async throws -> (CentralManager, KernelRadio) {
        let central = try await harness.central(configure)
        try await central.waitUntilPoweredOn(timeout: .seconds(10))
        let radio = try await KernelRadio.open(
            .socket(path: try #require(harness.managementSocket)), loop: harness.loop
        ) { [central] found in
            central.assumeLoopIsolated { $0.kernelReport(found) }
        }
        await central.setReportSource(.kernel, radio: radio)
        return (central, radio)
    }

    /// The results of a scan that keeps duplicates, as they came.
    final class ScanLog: Sendable {
        let results = Mutex<[ScanResult]>([])
        /// Whether a result so far passes `check`.
        func contains(where check: (ScanResult) -> Bool) -> Bool { results.withLock { $0.contains(where: check) } }
        func clear() { results.withLock { $0.removeAll() } }
    }

    /// Starts a scan (duplicates kept) on `central` whose results go to the returned log.
    static func scanLog(_ central: CentralManager) async throws -> (ScanLog, ScanToken) {
        let log = ScanLog()
        let token = try await central.scan(ScanOptions(allowDuplicates: true)) { result in
            log.results.withLock { $0.append(result) }
        }
        return (log, token)
    }

    /// Runs `body` with a ``kernelCentral(_:configure:)``, then closes both.
    static func onKernelPath(
        _ harness: CentralHarness, configure: (inout CentralOptions) -> Void = { _ in },
        _ body: (CentralManager) async throws -> Void
    ) async throws {
        let (central, radio) = try await kernelCentral(harness, configure: configure)
        try await body(central)
        await radio.close()
        await central.close()
    }

    @Test(
        "on the kernel's path the bus sends no Device1 advertisement signals; connect, notifications by PropertiesChanged, a write and a read still work; the device's rule goes with its link"
    )
    func kernelPath() async throws {
        try await CentralHarness.run(Scenarios.sensors(), managementSocket: true) { harness in
            let central = try await harness.central { $0.preferAcquireNotify = false }
            try await central.waitUntilPoweredOn(timeout: .seconds(10))
            // The D-Bus path first, as the contrast: every advertising device's changes arrive.
            let (seen, scan) = try await Self.scanLog(central)
            try await Self.expectBusRules(harness, [Self.everything], "the D-Bus path's one rule")
            let before = await central.deviceSignalsHandled
            try await eventually("Device1 signals on the D-Bus path") {
                await central.deviceSignalsHandled > before + 10
            }
            // The kernel's path.
            let radio = try await KernelRadio.open(
                .socket(path: try #require(harness.managementSocket)), loop: harness.loop
            ) { [central] found in
                central.assumeLoopIsolated { $0.kernelReport(found) }
            }
            await central.setReportSource(.kernel, radio: radio)
            try await Self.expectBusRules(harness, [Self.objectManager, Self.adapters], "the kernel path's rules")
            seen.clear()
            try await eventually("kernel reports of the battery sensor") {
                seen.contains { $0.kernelReport != nil && $0.peripheral.address == Scenarios.battery }
            }
            // While the simulator's devices advertise every 20 ms, with discovery on.
            let quiet = await central.deviceSignalsHandled
            try await Task.sleep(for: .milliseconds(500))
            #expect(await central.deviceSignalsHandled == quiet, "Device1 signals reached the central")
            #expect(await central.isScanning)

            let events = await central.connectionEvents()
            let peripheral = await central.peripheral(Scenarios.battery)
            try await central.connect(peripheral, timeout: .seconds(30))
            try await Self.expectBusRules(
                harness, [Self.objectManager, Self.adapters, Self.battery], "the connected device's rule")
            _ = try await first(events, "connected") { $0 == .connected(peripheral) }
            var characteristics: [BluetoothUUID: Characteristic] = [:]
            for service in try await central.discoverServices(for: peripheral) {
                for characteristic in try await central.discoverCharacteristics(for: service) {
                    characteristics[characteristic.uuid] = characteristic
                }
            }
            let values = try await central.notifications(for: try #require(characteristics[BluetoothUUID(0x2A19)]))
            #expect(try await collect(values, count: 3, "notifications as Value signals").count == 3)
            try await central.writeValue(
                [0x2A], for: try #require(characteristics[BluetoothUUID(0xFF01)]), type: .withResponse)
            #expect(try await central.readValue(for: try #require(characteristics[BluetoothUUID(0xFF02)])) == [0x2A])

            try await central.disconnect(peripheral)
            _ = try await first(events, "disconnected") {
                if case .disconnected = $0 { return true } else { return false }
            }
            try await Self.expectBusRules(harness, [Self.objectManager, Self.adapters], "the device's rule removed")
            await central.stopScan(scan)
            await central.close()  // (the rules go with the connection; the radio is closed after it)
            await radio.close()
        }
    }

    @Test(
        "back on D-Bus (the management socket closed) the broad rule returns and scans get bluetoothd's view again"
    )
    func fallbackToDBus() async throws {
        try await CentralHarness.run(Scenarios.sensors(), managementSocket: true) { harness in
            try await Self.onKernelPath(harness) { central in
                let (seen, scan) = try await Self.scanLog(central)
                try await Self.expectBusRules(harness, [Self.objectManager, Self.adapters], "the kernel path's rules")
                try await eventually("kernel reports") { seen.contains { $0.kernelReport != nil } }
                await central.setReportSource(.bluez)
                try await Self.expectBusRules(harness, [Self.everything], "the broad rule back")
                seen.clear()
                try await eventually("D-Bus reports of the battery sensor") {
                    seen.contains {
                        $0.kernelReport == nil && $0.peripheral.address == Scenarios.battery && $0.rssi != nil
                    }
                }
                await central.stopScan(scan)
            }
        }
    }

    @Test(
        "on the kernel's path an adopted link is watched from the start: its notifications come, its drop at a power cycle and the adapter going off are seen, and it comes back"
    )
    func adoption() async throws {
        try await CentralHarness.run(Scenarios.sensors(), managementSocket: true) { harness in
            let first = try await harness.central()
            let (peripheral, _) = try await first.connectBattery(autoReconnect: false)
            await first.close()  // BlueZ keeps the link
            try await Self.onKernelPath(harness, configure: { $0.preferAcquireNotify = false }) { central in
                try await Self.expectBusRules(
                    harness, [Self.objectManager, Self.adapters, Self.battery], "the adopted device's rule")
                let events = await central.connectionEvents()
                let services = try await central.discoverServices([BluetoothUUID(0x180F)], for: peripheral)
                let service = try #require(services.first)
                let level = try #require(try await central.discoverCharacteristics(for: service).first)
                let values = try await central.notifications(for: level)
                _ = try await collect(values, count: 2, "notifications of the adopted link")
                try await harness.sim.setPowered(adapter: "hci0", false)
                _ = try await TestSupport.first(events, "disconnected") {
                    if case .disconnected = $0 { return true } else { return false }
                }
                // The adapter's Powered=false came (its rule).
                try await eventually("poweredOff") { await central.state == .poweredOff }
                try await harness.sim.setPowered(adapter: "hci0", true)
                _ = try await TestSupport.first(events, "reconnected after power-on") { $0 == .connected(peripheral) }
                try await Self.expectBusRules(
                    harness, [Self.objectManager, Self.adapters, Self.battery],
                    "the device's rule after the power cycle")
            }
        }
    }
}
