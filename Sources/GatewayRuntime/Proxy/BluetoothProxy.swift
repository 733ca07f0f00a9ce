import BlueZ
import Bluetooth
import ESPHomeAPI
import EventLoop
import Gateway
import JSON

#if canImport(Glibc)
    import Glibc
#endif

/// `bluetooth_proxy` (docs/ha-bluetooth-proxy.md): the ESPHome native API server beside the
/// gateway core, fed by a scan of its own on the same central. The core and its MQTT side do not
/// know about it; both see every advertisement (the central hands each BlueZ report to every scan).
/// The server is announced by mDNS through Avahi when Avahi runs (``AvahiAnnouncer``).
///
/// Its background work — the BlueZ calls of connections through it, the handling of what Avahi
/// reports — runs in ``run()``, a child task of `gattway run`'s, on the loop; ``stop()`` ends it.
public struct BluetoothProxy: Sendable {
    let server: APIServer
    let loop: EventLoop
    let central: CentralManager
    let scan: ScanToken?
    let announcer: AvahiAnnouncer?
    /// Serves connections through the proxy (nil with `connection_slots` 0).
    let connections: ProxyCentral?
    /// Follows the adapter's state into BluetoothScannerStateResponse.
    let stateFollower: StateUpdatesToken

    /// Starts the listener, then the scan that feeds it. A listener that cannot bind is an error;
    /// a scan that cannot start is a warning (the server still answers, with no advertisements).
    /// Connections through the proxy share `gateway`'s connection slots (`bluetooth.max_connections`).
    public static func start(
        config: GatewayConfig, central: CentralManager, gateway: Gateway, loop: EventLoop, log: GatewayLogger
    ) async throws -> BluetoothProxy {
        let settings = config.bluetoothProxy
        let mac = (await central.adapterAddress)?.description ?? "00:00:00:00:00:00"
        let name = settings.name ?? hostName()
        let configuration = APIServerConfiguration(
            host: settings.host, port: settings.port,
            encryption: settings.encryptionKey.map { .noise(psk: $0) } ?? .plaintext,
            name: name, friendlyName: name, macAddress: mac, bluetoothMacAddress: mac, version: BuildInfo.version,
            maxClients: settings.maxClients, connectionSlots: settings.connectionSlots)
        let connections =
            settings.connectionSlots > 0 ? ProxyCentral(central: central, loop: loop, gateway: gateway) : nil
        await connections?.start()
        let server = try await loop.submit {
            let server = APIServer(configuration: configuration, loop: loop, backend: connections) { level, line in
                switch level {
                case .debug: log(.debug, line)
                case .info: log(.info, line)
                case .notice: log(.notice, line)
                case .warning: log(.warning, line)
                case .error: log(.error, line)
                }
            }
            try server.start()
            connections?.server = server
            return server
        }
        let port = try await loop.submit { server.port }
        log(
            .notice,
            "Bluetooth proxy: ESPHome API on \(settings.host):\(port) as \"\(name)\""
                + (settings.encryptionKey == nil ? " (plaintext)" : " (Noise encryption)"))
        var token: ScanToken?
        do {
            token = try await central.scan(ScanOptions(allowDuplicates: true), waitingForAdapter: true) { result in
                // On the loop thread, inside the handling of BlueZ's signal.
                server.forward(Self.rawAdvertisement(result))
            }
        } catch {
            log(.warning, "Bluetooth proxy: cannot scan: \(error)")
            _ = try? await loop.submit { server.scannerState = .failed }
        }
        // Announced (and re-announced after a collision or an avahi-daemon restart) in the
        // background; only a missing system bus ends it here.
        var announcer: AvahiAnnouncer?
        do {
            announcer = try await AvahiAnnouncer.start(configuration, port: port, on: loop, log: log)
        } catch {
            log(
                .warning,
                "Bluetooth proxy: not announced by mDNS (no system bus: \(error)); add it in Home Assistant by address, port \(port)"
            )
        }
        // The adapter powered off (or bluetoothd gone) stops the scan: clients see the scanner
        // stopped, and running again when discovery is re-armed. Told by the central on the
        // loop thread, where the server lives.
        let scanning = token != nil
        let stateFollower = await central.stateUpdates { state in
            server.scannerState = state == .poweredOn ? (scanning ? .running : .failed) : .stopped
        }
        return BluetoothProxy(
            server: server, loop: loop, central: central, scan: token, announcer: announcer, connections: connections,
            stateFollower: stateFollower)
    }

    /// One BlueZ report as ESPHome sends it: the address as a 48-bit number, its type (0 public,
    /// 1 random), the RSSI (-127 when BlueZ gave none) and the AD bytes rebuilt from its fields.
    static func rawAdvertisement(_ result: ScanResult) -> ServerMessage.RawAdvertisement {
        ServerMessage.RawAdvertisement(
            address: result.peripheral.address.rawValue, rssi: Int32(result.rssi ?? -127),
            addressType: result.peripheral.addressType == .random ? 1 : 0,
            data: AdvertisementBytes.build(result.advertisementData))
    }

    /// Runs the proxy's background work until ``stop()`` (or until the calling task is
    /// cancelled): the connections' BlueZ calls and the mDNS announcer, each a child task.
    public func run() async {
        await withDiscardingTaskGroup { group in
            if let connections { group.addTask { await connections.run() } }
            if let announcer { group.addTask { await announcer.run() } }
        }
    }

    /// Says goodbye to the clients and closes the listener (their connections through the proxy
    /// are disconnected in BlueZ), stops the scan and withdraws the mDNS announcement; returns
    /// once the disconnects and the withdrawal are done. Cancelling the calling task (the stop's
    /// deadline) ends what is still waited for: the BlueZ and Avahi calls are cancelled.
    public func stop() async {
        let central = self.central
        let stateFollower = self.stateFollower
        _ = try? await loop.submit { [server] in
            central.assumeLoopIsolated { $0.stopStateUpdates(stateFollower) }
            server.stop()
        }
        async let withdrawn: Void? = announcer?.withdraw()
        if let scan { await central.stopScan(scan) }
        await connections?.stop()
        _ = await withdrawn
    }

    /// The `bluetooth_proxy` section of `bridge/health`; called on the loop.
    public func healthSection() -> [(key: String, value: JSONValue)] {
        let statistics = server.statistics
        func number(_ value: Int) -> JSONValue { .number(Double(value)) }
        return [
            (
                "bluetooth_proxy",
                .object([
                    ("clients", number(statistics.clients)), ("accepted", number(statistics.accepted)),
                    ("advertisements_sent", number(statistics.advertisementsSent)),
                    ("connections", number(statistics.proxyConnections)),
                    ("connects", number(statistics.proxyConnects)),
                    ("connect_failures", number(statistics.proxyConnectFailures)),
                    (
                        "closed",
                        .object([
                            ("max_clients", number(statistics.refusedFull)),
                            ("handshake", number(statistics.handshakeFailures)),
                            ("protocol", number(statistics.protocolErrors)),
                            ("plaintext_probe", number(statistics.plaintextProbes)),
                            ("zero_key_probe", number(statistics.zeroKeyProbes)),
                            ("password", number(statistics.passwordsRefused)),
                            ("oversize", number(statistics.oversizeFrames)),
                            ("idle", number(statistics.idleTimeouts)),
                            ("slow", number(statistics.slowClients)),
                        ])
                    ),
                ])
            )
        ]
    }

    /// The host name, cut to ESPHome's 31 characters (the default `name`).
    public static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "gattway" }
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        let name = String(decoding: bytes, as: UTF8.self)
        return name.isEmpty ? "gattway" : String(name.prefix(31))
    }
}
