// realbluez-central: the CentralManager scenario against the real bluetoothd, run inside the
// real-BlueZ VM by Tests/RealBlueZ/guest-tests.sh (peripheral.py advertising on hci1, an unrelated
// advertiser on hci2, this central on hci0). Prints one line per check:
//   PASS name detail   /   FAIL name detail
// and exits 1 when any check failed. The assertions mirror Tests/BlueZTests (simulator).
import BlueZ
import Bluetooth
import DBus
import EventLoop
import Foundation
import Retry

let batteryAddress = BluetoothAddress("00:AA:01:01:00:01")!
let otherAddress = BluetoothAddress("00:AA:01:02:00:02")!
let centralAddress = "00_AA_01_00_00_00"
nonisolated(unsafe) var failures = 0

/// The guest's uptime, as the bluetoothd log lines and guest-tests.sh show it.
func uptime() -> String {
    (try? String(contentsOfFile: "/proc/uptime", encoding: .utf8))?.split(separator: " ").first.map(String.init) ?? "?"
}

func report(_ ok: Bool, _ name: String, _ detail: String = "") {
    if !ok { failures += 1 }
    print("\(ok ? "PASS" : "FAIL") \(name) \(detail) [guest \(uptime()) s]")
    fflush(nil)
}

struct Timeout: Error, CustomStringConvertible { var description: String }

/// Runs `body` for at most `seconds`. With `nudge`, asks peripheral.py every 10 s to advertise
/// anew (SIGUSR1): btvirt's controllers send an advertising report only when scanning or
/// advertising starts and the kernel misses one now and then, where a radio would repeat it.
func within<T: Sendable>(
    _ seconds: Double, _ what: String, nudge: Bool = false, _ body: @escaping @Sendable () async throws -> T
)
    async throws -> T
{
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw Timeout(description: "\(what): nothing within \(seconds) s")
        }
        if nudge {
            group.addTask {
                while true {
                    try await Task.sleep(for: .seconds(10))
                    print("nudge: peripheral.py advertises anew (\(what)) [guest \(uptime()) s]")
                    _ = await shell(
                        "kill -USR1 \(ProcessInfo.processInfo.environment["PERIPHERAL_PID"] ?? "0") 2>/dev/null")
                }
            }
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

func first<S: AsyncSequence & Sendable>(
    _ stream: S, within seconds: Double = 15, _ what: String, nudge: Bool = false,
    where predicate: @escaping @Sendable (S.Element) -> Bool = { _ in true }
) async throws -> S.Element where S.Element: Sendable {
    try await within(seconds, what, nudge: nudge) {
        for try await element in stream where predicate(element) { return element }
        throw Timeout(description: "\(what): the stream ended")
    }
}

func collect<S: AsyncSequence & Sendable>(_ stream: S, count: Int, within seconds: Double = 15, _ what: String)
    async throws -> [S.Element]
where S.Element: Sendable {
    try await within(seconds, what) {
        var out: [S.Element] = []
        for try await element in stream {
            out.append(element)
            if out.count == count { return out }
        }
        throw Timeout(description: "\(what): the stream ended after \(out.count)")
    }
}

/// Runs a check; a thrown error is a FAIL with the error as detail. Returns the body's result.
@discardableResult
func check<T>(_ name: String, _ body: () async throws -> (Bool, String, T?)) async -> T? {
    do {
        let (ok, detail, value) = try await body()
        fflush(nil)
        report(ok, name, detail)
        return value
    } catch {
        report(false, name, "threw \(error)")
        return nil
    }
}

func isDisconnect(_ event: ConnectionEvent) -> Bool {
    if case .disconnected = event { return true } else { return false }
}

/// Runs a shell command on its own thread (never blocking the concurrency pool); its exit status.
func shell(_ command: String) async -> Int32 {
    await withCheckedContinuation { continuation in
        Thread {
            let status = system(command)
            continuation.resume(returning: status == -1 ? -1 : (status >> 8) & 0xff)
        }.start()
    }
}

func setPowered(_ client: DBusConnection, _ adapter: String, _ on: Bool) async throws {
    _ = try await client.call(
        destination: "org.bluez", path: try DBusObjectPath("/org/bluez/\(adapter)"),
        interface: "org.freedesktop.DBus.Properties",
        method: "Set", arguments: [.string("org.bluez.Adapter1"), .string("Powered"), .variant(.boolean(on))])
}

/// The peripheral drops the link: bluetoothd's hci1 side disconnects the central.
func peripheralDropsLink(_ client: DBusConnection) async throws {
    _ = try await client.call(
        destination: "org.bluez", path: try DBusObjectPath("/org/bluez/hci1/dev_\(centralAddress)"),
        interface: "org.bluez.Device1",
        method: "Disconnect", timeout: .seconds(10))
}

func characteristics(_ central: CentralManager, _ peripheral: Peripheral) async throws -> [BluetoothUUID:
    Characteristic]
{
    var all: [BluetoothUUID: Characteristic] = [:]
    for service in try await central.discoverServices(for: peripheral) {
        for characteristic in try await central.discoverCharacteristics(for: service) {
            all[characteristic.uuid] = characteristic
        }
    }
    return all
}

func options(acquire: Bool) -> CentralOptions {
    var options = CentralOptions(adapter: AdapterSelector("hci0"))
    var reconnect = ReconnectPolicy<SystemRandomNumberGenerator>.Configuration()
    reconnect.firstDelay = 0.2...0.5
    reconnect.maximumDelay = 2
    options.reconnect = reconnect
    options.preferAcquireNotify = acquire
    options.discoveryRetryDelay = 0.2
    options.discoveryRetryMaximum = 1
    return options
}

func run() async throws {
    let loop = EventLoop(name: "realbluez-central")
    let client = try await DBusConnection.connect(to: .system, on: loop)

    // Phase A: StartNotify central.
    let central = try await CentralManager.start(options: options(acquire: false), on: loop)
    try await central.waitUntilPoweredOn(timeout: .seconds(10))
    let adapterAddress = await central.adapterAddress
    report(
        adapterAddress?.description == "00:AA:01:00:00:00", "central.adapter", "\(String(describing: adapterAddress))")
    let events = await central.connectionEvents()

    // Scan with a 180F filter: the battery peripheral with its advertisement, never the 180D one.
    let peripheral: Peripheral? = await check("scan.filter-180F") {
        let results = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180F)], allowDuplicates: true))
        // Generous: btvirt's controllers send one advertising report per scan start or
        // advertising start, which the kernel can miss; the next comes when the kernel restarts
        // its LE scan (every 10.24 s) or the peripheral advertises again.
        let found = try await first(results, within: 45, "battery peripheral found", nudge: true) {
            $0.peripheral.address == batteryAddress
        }
        // Keep listening for a while: the unrelated advertiser (hci2) must not be reported.
        let extra = try? await collect(results, count: 10_000, within: 2, "more results")
        let seen = Set((extra ?? []).map(\.peripheral.address)).union([found.peripheral.address])
        let data = found.advertisementData
        let ok =
            !seen.contains(otherAddress) && data.serviceUUIDs.contains(BluetoothUUID(0x180F))
            && data.localName == "RBZ-Bat" && data.manufacturerData == [0xFFFF: Array("RBZ1".utf8)]
            && data.serviceData == [BluetoothUUID(0x180F): [0x64]]
        return (
            ok,
            "seen=\(seen.map(\.description).sorted()) name=\(data.localName ?? "nil") uuids=\(data.serviceUUIDs) mfr=\(data.manufacturerData) svc=\(data.serviceData) rssi=\(String(describing: data.rssi))",
            found.peripheral
        )
    }
    guard let peripheral else { return }

    // A scan with a 180D filter reports the unrelated device (so the advertiser is really on the air).
    await check("scan.filter-180D") {
        let results = try await central.scan(ScanOptions(services: [BluetoothUUID(0x180D)]))
        let found = try await first(results, within: 45, "180D advertiser", nudge: true) {
            $0.peripheral.address == otherAddress
        }
        return (true, "found \(found.peripheral)", ())
    }

    let connected: Peripheral? = await check("connect") {
        let started = ContinuousClock.now
        let up = try await central.connect(peripheral, timeout: .seconds(45), autoReconnect: true)
        _ = try await first(events, "connected event") { $0 == .connected(peripheral) }
        return (up.isConnected, "in \(ContinuousClock.now - started)", up)
    }
    guard connected != nil else { return }

    let chars: [BluetoothUUID: Characteristic] =
        await check("discover.services") {
            let services = try await central.discoverServices(for: peripheral)
            let uuids = Set(services.map(\.uuid))
            let filtered = try await central.discoverServices([BluetoothUUID(0x180F)], for: peripheral)
            let ok =
                uuids.isSuperset(of: [BluetoothUUID(0x180F), BluetoothUUID(0x181A), BluetoothUUID(0xFF00)])
                && filtered.map(\.uuid) == [BluetoothUUID(0x180F)]
            return (
                ok, "services=\(services.map { "\($0.uuid.shortDescription)@\(String($0.handle, radix: 16))" })",
                try await characteristics(central, peripheral)
            )
        } ?? [:]
    guard let level = chars[BluetoothUUID(0x2A19)], let command = chars[BluetoothUUID(0xFF01)],
        let state = chars[BluetoothUUID(0xFF02)], let temperature = chars[BluetoothUUID(0x2A6E)],
        let humidity = chars[BluetoothUUID(0x2A6F)]
    else {
        report(false, "discover.characteristics", "missing: have \(chars.keys.map(\.shortDescription).sorted())")
        return
    }
    report(
        level.properties == [.read, .notify] && temperature.properties == [.read, .notify]
            && command.properties == [.write, .writeWithoutResponse], "discover.characteristics",
        "2A19=\(level.properties) 2A6E=\(temperature.properties) FF01=\(command.properties) all=\(chars.keys.map(\.shortDescription).sorted())"
    )
    let name = await central.peripheral(batteryAddress).name
    report(name == "RBZ-Bat", "device.name-after-connect", "name=\(name ?? "nil")")

    await check("read") {
        let battery = try await central.readValue(for: level)
        let celsius = try await central.readValue(for: temperature)
        let percent = try await central.readValue(for: humidity)
        let text = try await central.readValue(for: try require2(chars[BluetoothUUID(0xFF05)]))
        let ok =
            battery.count == 1 && (1...100).contains(battery[0]) && celsius.count == 2 && percent.count == 2
            && text == Array("hello world".utf8)
        return (ok, "2A19=\(battery) 2A6E=\(celsius) 2A6F=\(percent) FF05=\(String(decoding: text, as: UTF8.self))", ())
    }
    await check("write.with-response") {
        try await central.writeValue([0x01, 0x02], for: command, type: .withResponse)
        let back = try await central.readValue(for: state)
        return (back == [0x01, 0x02], "state=\(back)", ())
    }
    await check("write.without-response") {
        try await central.writeValue([0x03], for: command, type: .withoutResponse)
        var back: [UInt8] = []
        for _ in 0..<20 {
            back = try await central.readValue(for: state)
            if back == [0x03] { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        return (back == [0x03], "state=\(back)", ())
    }
    let maxCommand = await central.maximumWriteValueLength(for: command, type: .withoutResponse)
    let maxRequest = await central.maximumWriteValueLength(for: command, type: .withResponse)
    // Informational: the simulator answers 514/512 (MTU 517); real BlueZ's MTU property may
    // still say 23 (see docs/simulator.md, known differences).
    report(
        maxCommand >= 20 && maxRequest == 512, "write.maximum-length",
        "command=\(maxCommand) request=\(maxRequest) (simulator: 514/512)")
    await check("error.read-att-0x80") {
        do {
            _ = try await central.readValue(for: try require2(chars[BluetoothUUID(0xFF03)]))
            return (false, "no error", ())
        } catch let error as CentralError {
            return (
                error.code == .failed && error.bluezName == "org.bluez.Error.Failed",
                "\(error.code) \(error.bluezName ?? "-") \(error.message)", ()
            )
        }
    }
    await check("error.write-invalid-length") {
        do {
            try await central.writeValue([1], for: try require2(chars[BluetoothUUID(0xFF04)]), type: .withResponse)
            return (false, "no error", ())
        } catch let error as CentralError {
            return (error.code == .invalidValueLength, "\(error.code) \(error.bluezName ?? "-") \(error.message)", ())
        }
    }
    await check("error.write-read-only") {
        do {
            try await central.writeValue([1], for: level, type: .withResponse)
            return (false, "no error", ())
        } catch let error as CentralError {
            return (
                error.code == .operationNotSupported, "\(error.code) \(error.bluezName ?? "-") \(error.message)", ()
            )
        }
    }

    // Notifications with StartNotify (the read echo is held back).
    let levels = await check("notify.start-notify") {
        let values = try await central.notifications(for: level)
        let got = try await collect(values, count: 3, "three 2A19 notifications")
        return (got[0][0] != got[2][0], "values=\(got.map { $0[0] })", values)
    }

    // The peripheral drops the link: reported, reconnected, notifications resume.
    await check("link-drop.reconnect") {
        let started = ContinuousClock.now
        try await peripheralDropsLink(client)
        let dropped = try await first(events, "disconnected after the drop", where: isDisconnect)
        guard case .disconnected(_, let error) = dropped else { return (false, "\(dropped)", ()) }
        _ = try await first(events, within: 45, "reconnected", nudge: true) { $0 == .connected(peripheral) }
        var detail = "error=\(error?.code.rawValue ?? "nil") reconnected in \(ContinuousClock.now - started)"
        if let levels {
            let again = try await collect(levels, count: 3, "notifications after the reconnection")
            detail += " values=\(again.map { $0[0] })"
        }
        return (error?.code == .peripheralDisconnected, detail, ())
    }
    await central.close()

    // Phase B: AcquireNotify central adopting the link.
    let second = try await CentralManager.start(options: options(acquire: true), on: loop)
    try await second.waitUntilPoweredOn(timeout: .seconds(10))
    let states = await second.stateUpdates()
    let events2 = await second.connectionEvents()
    let adopted = await second.connectedPeripherals()
    report(adopted.map(\.address) == [batteryAddress], "adopt.existing-connection", "connected=\(adopted)")
    let chars2 = (try? await characteristics(second, peripheral)) ?? [:]
    guard let temperature2 = chars2[BluetoothUUID(0x2A6E)] else {
        report(false, "notify.acquire-notify", "no 2A6E after adoption")
        return
    }
    let scan = try await second.scan(ScanOptions(services: [BluetoothUUID(0x180F)], allowDuplicates: true))
    let temperatures = await check("notify.acquire-notify") {
        let values = try await second.notifications(for: temperature2)
        let got = try await collect(values, count: 3, "three 2A6E notifications")
        let flag = try await notifyAcquired(client, temperature2)
        return (flag == true, "NotifyAcquired=\(String(describing: flag)) values=\(got)", values)
    }
    await check("link-drop.reconnect-acquire-notify") {
        try await peripheralDropsLink(client)
        let dropped = try await first(events2, "disconnected after the drop", where: isDisconnect)
        _ = try await first(events2, within: 45, "reconnected", nudge: true) { $0 == .connected(peripheral) }
        var detail = "\(dropped)"
        if let temperatures {
            let again = try await collect(temperatures, count: 3, "notifications after the reconnection")
            detail += " values=\(again)"
        }
        return (true, detail, ())
    }
    await check("power-cycle") {
        try await setPowered(client, "hci0", false)
        let dropped = try await first(events2, "disconnected by power-off", where: isDisconnect)
        guard case .disconnected(_, let error) = dropped else { return (false, "\(dropped)", ()) }
        _ = try await first(states, "poweredOff") { $0 == .poweredOff }
        try await setPowered(client, "hci0", true)
        _ = try await first(states, "poweredOn") { $0 == .poweredOn }
        _ = try await first(events2, within: 45, "reconnected after power-on", nudge: true) {
            $0 == .connected(peripheral)
        }
        var detail = "error=\(error?.code.rawValue ?? "nil")"
        if let temperatures {
            detail += " values=\(try await collect(temperatures, count: 3, "notifications after power-on"))"
        }
        var scanning = false
        for _ in 0..<150 where !scanning {  // re-armed after power-on; bluetoothd defers the start while connecting
            scanning = await second.isScanning
            if !scanning { try await Task.sleep(for: .milliseconds(100)) }
        }
        // The simulator test expects .poweredOff; real bluetoothd signals Connected=false before
        // Powered=false, so the central may report .peripheralDisconnected (docs/simulator.md).
        let codeOK = error?.code == .poweredOff || error?.code == .peripheralDisconnected
        return (codeOK && scanning, detail + " scanning=\(scanning)", ())
    }
    await check("bluetoothd-restart") {
        let log = "\(ProcessInfo.processInfo.environment["LOGS"] ?? "/tmp")/rbz-bluetoothd-restart.txt"
        let status = await shell("rbz-bluetoothd restart > \(log) 2>&1")
        guard status == 0 else {
            let why = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return (false, "rbz-bluetoothd restart exited \(status): \(why)", ())
        }
        _ = try await first(states, "resetting or poweredOff") { $0 == .resetting || $0 == .poweredOff }
        let dropped = try await first(events2, "disconnected by the restart", where: isDisconnect)
        _ = try await first(states, "poweredOn after the restart") { $0 == .poweredOn }
        _ = try await first(scan, within: 45, "rediscovered", nudge: true) { $0.peripheral.address == batteryAddress }
        _ = try await first(events2, within: 45, "reconnected after the restart", nudge: true) {
            $0 == .connected(peripheral)
        }
        var detail = "\(dropped)"
        if let temperatures {
            detail += " values=\(try await collect(temperatures, count: 3, "notifications after the restart"))"
        }
        return (true, detail, ())
    }
    await check("disconnect") {
        // Our own disconnect must be reported without an error: the link has to be up first
        // (otherwise an earlier drop, still queued in the stream, would be taken for ours).
        guard await second.connectedPeripherals().map(\.address) == [batteryAddress] else {
            return (false, "not connected before the disconnect", ())
        }
        let started = ContinuousClock.now
        try await second.disconnect(peripheral)
        let event = try await first(events2, "disconnected", where: isDisconnect)
        return (event == .disconnected(peripheral, nil), "\(event) in \(ContinuousClock.now - started)", ())
    }
    await check("connect-again") {
        // This central learns of the restarted bluetoothd's adapter from its own signals, which
        // may come after the first central saw poweredOn: Core Bluetooth's rule, connect only
        // when poweredOn.
        try await second.waitUntilPoweredOn(timeout: .seconds(30))
        // connect returns when the link is up; the GATT objects are there once discovery says so
        // (after a bluetoothd restart and a disconnect they may be exported anew).
        _ = try await second.connect(peripheral, timeout: .seconds(45), autoReconnect: false)
        do {
            let level = try await characteristics(second, peripheral)[BluetoothUUID(0x2A19)]
            let value = try await second.readValue(for: try require2(level, "2A19"))
            try await second.disconnect(peripheral)
            return (value.count == 1, "2A19=\(value)", ())
        } catch {
            try? await second.disconnect(peripheral)  // the next section starts without our link
            throw error
        }
    }
    await second.close()
    await client.close()
}

func notifyAcquired(_ client: DBusConnection, _ characteristic: Characteristic) async throws -> Bool? {
    let reply = try await client.call(
        destination: "org.bluez", path: "/", interface: "org.freedesktop.DBus.ObjectManager",
        method: "GetManagedObjects")
    let uuid = characteristic.uuid.description.lowercased()
    guard let objects = reply.first?.dictionary else { return nil }
    for (path, interfaces) in objects where path.contains("dev_00_AA_01_01_00_01") {
        guard let props = interfaces.dictionary?["org.bluez.GattCharacteristic1"]?.dictionary,
            props["UUID"]?.string?.lowercased() == uuid
                || props["UUID"]?.string?.lowercased().hasPrefix("0000\(uuid)") == true
        else { continue }
        return props["NotifyAcquired"]?.bool
    }
    return nil
}

struct Missing: Error, CustomStringConvertible { var description: String }
func require2<T>(_ value: T?, _ what: String = "value") throws -> T {
    guard let value else { throw Missing(description: "\(what) missing") }
    return value
}

let started = ContinuousClock.now
do {
    try await within(360, "the whole scenario") { try await run() }
} catch {
    report(false, "scenario", "aborted: \(error)")
}
print("realbluez-central: \(failures) failed in \(ContinuousClock.now - started)")
exit(failures == 0 ? 0 : 1)
