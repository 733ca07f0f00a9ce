import BlueZ
import BluetoothManagement
import DBus
import EventLoop
import Gateway
import JSON
import LocalSystem
import Synchronization

/// The BlueZ centrals of `gattway run` as a service, one per adapter of `bluetooth.adapters`
/// (``GatewayAdapters``): started at ``start()`` (they do not wait for their adapters: an adapter
/// that is off, blocked or missing is a condition the core reports, and a central whose adapter
/// comes later scans once it is there), closed at the stop's last step (discovery stopped;
/// calls bluetoothd does not answer cancelled at the deadline). On the management path the
/// centrals share one socket: each report is read and decoded once and goes to the central of
/// its controller.
public final class BlueZCentralService: Service {
    public let name = "BlueZ"
    let config: GatewayConfig
    let stateDirectory: String?
    let bus: DBusConnection.Bus
    let loop: EventLoop
    let log: GatewayLogger
    let radioEndpoint: ManagementEndpoint
    private struct Started {
        var adapters: GatewayAdapters?
        var centrals: [CentralManager] = []
        var radio: KernelRadio?
        var scanMode: ScanModeController?
    }
    private let started = Mutex(Started())

    /// - Parameters:
    ///   - stateDirectory: where `central.json` is kept (nil: in memory only).
    ///   - radioEndpoint: the management socket `bluetooth.radio` `auto` or `mgmt` reads (the
    ///     kernel's, or a served one such as the simulator's).
    public init(
        config: GatewayConfig, stateDirectory: String?, bus: DBusConnection.Bus = .system, loop: EventLoop,
        log: GatewayLogger, radioEndpoint: ManagementEndpoint = .kernel
    ) {
        self.config = config
        self.stateDirectory = stateDirectory
        self.bus = bus
        self.loop = loop
        self.log = log
        self.radioEndpoint = radioEndpoint
    }

    /// The first adapter's central, once ``start()`` made it.
    public var central: CentralManager? { started.withLock { $0.centrals.first } }
    /// Every adapter's central with the choice of a link's adapter, once ``start()`` made them.
    public var adapters: GatewayAdapters? { started.withLock { $0.adapters } }
    /// The management socket the centrals' scans read, when `bluetooth.radio` chose it.
    public var radio: KernelRadio? { started.withLock { $0.radio } }
    /// `bluetooth.scan_mode` for the gateway's scan, once ``start()`` made it.
    var scanMode: ScanModeController? { started.withLock { $0.scanMode } }

    /// The state file of adapter `name`: `central.json` for the first adapter (as with one),
    /// `central-hciN.json` for the others.
    static func stateFileName(_ name: String, first: Bool) -> String {
        first ? "central.json" : "central-\(name).json"
    }

    public func start() async throws {
        let log = self.log
        var centrals: [CentralManager] = []
        for (index, adapter) in config.bluetooth.adapters.enumerated() {
            var options = CentralOptions(adapter: AdapterSelector(adapter))
            // Each central hears only its own adapter's signals (besides the object manager's).
            options.adapterSignalsOnly = config.bluetooth.adapters.count > 1
            if let stateDirectory {
                try? LocalFile.createDirectories(stateDirectory)
                let file = Self.stateFileName(adapter, first: index == 0)
                options.stateFilePath = stateDirectory + "/" + file
                options.stateFileProblem = { error in
                    if let error {
                        log(
                            .warning,
                            "\(file): \(error); the links and subscriptions to restore after a crash are kept in memory only until it can be written"
                        )
                    } else {
                        log(.notice, "\(file): written again")
                    }
                }
            }
            let central = try await CentralManager.start(options: options, bus: bus, on: loop)
            centrals.append(central)
            started.withLock { $0.centrals = centrals }
        }
        let adapters = GatewayAdapters(
            names: config.bluetooth.adapters, centrals: centrals, slotsPerAdapter: config.bluetooth.maxConnections)
        started.withLock { $0.adapters = adapters }
        if centrals.count > 1 {
            log(
                .notice,
                "adapters: \(config.bluetooth.adapters.joined(separator: ", ")) scan together; a link goes through the one that hears the device best with a free slot (max_connections \(config.bluetooth.maxConnections) each)"
            )
        }
        for central in centrals { await central.setReportBatch(config.bluetooth.reportBatch) }
        let radio = try await RadioSelection.open(
            config.bluetooth.radio, adapters: config.bluetooth.adapters, endpoint: radioEndpoint, centrals: centrals,
            loop: loop, log: log)
        if let radio { await radio.setCoalescing(config.bluetooth.reportBatch) }
        started.withLock { $0.radio = radio }
        // A monitor a killed predecessor left in the kernel is removed, ours recorded (docs/bluez.md §7.1).
        if let radio, let stateDirectory { await radio.keepMonitorRecord(at: stateDirectory + "/adv-monitor") }
        try Self.checkScanMode(config.bluetooth.scanMode, managementPath: radio != nil, log: log)
        let scanMode = ScanModeController(config: config, loop: loop, log: log)
        started.withLock { $0.scanMode = scanMode }
        // The D-Bus round trip to bluetoothd in bridge/health (ble_latency_ms), measured once per report.
        if config.health.enabled {
            await centrals[0].startPinging(every: .milliseconds(Int64(saturating: config.health.interval * 1000)))
        }
    }

    /// `radio` in `bridge/health` (docs/operations.md): the path the scans read, on the
    /// management path the reports it delivered since the start and per second since the last
    /// health message, and each adapter with its object path, state, scan mode and the reports
    /// the gateway's scan got from it (in all, and per second since the last health message).
    /// Called on the loop thread.
    func radioHealth() -> JSONValue {
        let path = radio == nil ? "dbus" : "mgmt"
        var members: [(key: String, value: JSONValue)] = [
            (key: "path", value: .string(path)), (key: "adapter", value: .string(config.bluetooth.adapter)),
        ]
        if let radio {
            let (reports, dropped) = radio.assumeLoopIsolated { ($0.reports, $0.droppedPackets) }
            let now = ContinuousClock.now
            let perSecond = rate.withLock { last -> Double in
                defer { last = (now, reports) }
                guard let previous = last else { return 0 }
                let seconds =
                    Double((now - previous.at).components.seconds)
                    + Double((now - previous.at).components.attoseconds) / 1e18
                return seconds > 0 ? Double(reports - previous.reports) / seconds : 0
            }
            members += [
                (key: "reports", value: .number(Double(reports))),
                (key: "reports_per_second", value: .number((perSecond * 10).rounded() / 10)),
                (key: "dropped_packets", value: .number(Double(dropped))),
            ]
        }
        if let adapters {
            let rates = adapters.reportRates()
            let each = adapters.centrals.indices.map { index -> JSONValue in
                let (object, state, mode) = adapters.centrals[index].assumeLoopIsolated {
                    ($0.adapterObjectPath, AdapterAdvice.refined($0.condition), $0.scanMode)
                }
                return .object([
                    (key: "name", value: .string(adapters.names[index])),
                    (key: "object_path", value: object.map(JSONValue.string) ?? .null),
                    (key: "path", value: .string(path)),
                    (key: "state", value: .string(state.rawValue)),
                    (key: "mode", value: .string(mode.map { $0 == .passive ? "passive" : "active" } ?? "none")),
                    (key: "reports", value: .number(Double(rates[index].reports))),
                    (key: "reports_per_second", value: .number((rates[index].perSecond * 10).rounded() / 10)),
                ])
            }
            members.append((key: "adapters", value: .array(each)))
        }
        return .object(members)
    }
    private let rate = Mutex<(at: ContinuousClock.Instant, reports: Int)?>(nil)

    /// `passive` needs the management path (bluetoothd 5.66 has no passive scan without its
    /// experimental monitor interface): without it the process does not start. `auto` there
    /// scans actively, said once.
    static func checkScanMode(
        _ mode: BluetoothSettings.ScanModeChoice, managementPath: Bool, log: GatewayLogger
    ) throws {
        switch (mode, managementPath) {
        case (.active, _):
            log(.notice, "scan mode: active (bluetooth.scan_mode)")
        case (.passive, true), (.auto, true):
            log(
                .notice,
                "scan mode: \(mode.rawValue): the kernel scans passively for an advertisement monitor of gattway's"
                    + (mode == .auto ? ", actively in windows while something needs scan responses" : ""))
        case (.passive, false):
            throw RunFailure(
                "bluetooth.scan_mode is passive, but reports come from bluetoothd's D-Bus view, whose discovery is always active (BlueZ 5.66 scans passively only for its experimental advertisement monitors, bluetoothd -E); passive needs the kernel's management socket (bluetooth.radio auto or mgmt, with CAP_NET_ADMIN), or set \"scan_mode\": \"active\"",
                isConfiguration: false)
        case (.auto, false):
            log(
                .notice,
                "scan mode: active, because auto scans passively only on the kernel's management socket and reports come from bluetoothd's D-Bus view"
            )
        }
    }

    public func stop(within deadline: StopDeadline) async -> String? {
        scanMode?.stop()
        // The monitors outlive the socket in the kernel (their passive scan would go on): removed first.
        if let radio {
            await radio.releasePassiveScan()
            await radio.close()
        }
        let centrals = started.withLock { $0.centrals }
        guard !centrals.isEmpty else { return nil }
        let closed = await StopDeadline.bounded(deadline.closeRemaining) {
            for central in centrals { await central.close() }
        }
        return closed ? nil : Self.notAnswered
    }

    /// The remark on the last line of the stop when bluetoothd did not answer the close.
    static let notAnswered = "BlueZ did not answer: its calls were cancelled"
}

/// The BlueZ peripheral role's manager as a service (with `role` peripheral or both), on its own
/// adapter when `peripheral.adapter` names one: services and advertising wait for the adapter
/// instead of failing the start; the adapter's states are logged. Closed at the stop's last step
/// (the advertisement and GATT application unregistered).
public final class BlueZPeripheralService: Service {
    public let name = "BlueZ"
    let adapter: String
    let bus: DBusConnection.Bus
    let loop: EventLoop
    let log: GatewayLogger
    private struct Started {
        var manager: PeripheralManager?
        var stateLog: StateUpdatesToken?
        var port: PeripheralBLEPort?
    }
    private let started = Mutex(Started())

    public init(adapter: String, bus: DBusConnection.Bus = .system, loop: EventLoop, log: GatewayLogger) {
        self.adapter = adapter
        self.bus = bus
        self.loop = loop
        self.log = log
    }

    /// The core's peripheral port over the manager, once ``start()`` made it.
    public var port: PeripheralBLEPort? { started.withLock { $0.port } }

    public func start() async throws {
        let (adapter, log) = (self.adapter, self.log)
        var options = PeripheralOptions(adapter: AdapterSelector(adapter))
        options.waitingForAdapter = true
        let manager = try await PeripheralManager.start(options: options, bus: bus, on: loop)
        started.withLock { $0.manager = manager }
        // The peripheral role's adapter state in the log, told by its manager on the loop thread
        // (the central's adapter is the core's: logged once per change, with what to do).
        let stateLog = await manager.stateUpdates { state in
            log(.notice, "BlueZ: \(adapter) (peripheral) is \(state)")
        }
        let port = await PeripheralBLEPort(manager: manager, log: log)
        started.withLock {
            $0.stateLog = stateLog
            $0.port = port
        }
    }

    public func stop(within deadline: StopDeadline) async -> String? {
        let (manager, stateLog) = started.withLock { ($0.manager, $0.stateLog) }
        guard let manager else { return nil }
        if let stateLog { await manager.stopStateUpdates(stateLog) }
        let closed = await StopDeadline.bounded(deadline.closeRemaining) { await manager.close() }
        return closed ? nil : BlueZCentralService.notAnswered
    }
}
