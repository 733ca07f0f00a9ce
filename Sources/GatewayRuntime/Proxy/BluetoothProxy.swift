import BlueZ
import Bluetooth
import BluetoothManagement
import ESPHomeAPI
import EventLoop
import Gateway
import LocalSystem
import ProxyBackend

#if canImport(Glibc)
    import Glibc
#endif

/// `bluetooth_proxy` (docs/ha-bluetooth-proxy.md): the ESPHome native API server beside the
/// gateway core, fed by a scan of its own on the same central. The core and its MQTT side do not
/// know about it; both see every advertisement (the central hands each BlueZ report to every scan).
/// The server is announced by mDNS through Avahi when Avahi runs (``AvahiAnnouncer``).
///
/// Connections through it are ``ProxyBackend``'s, whose BlueZ calls are jobs of the gateway core
/// (it is the core's ``GatewayAttachment``, made before the gateway). The handling of what Avahi
/// reports runs in ``run()``, a child task of `gattway run`'s, on the loop; ``stop()`` ends it.
///
/// With several adapters the proxy is still one scanner: its scan runs on every adapter's
/// central and each adapter's reports are forwarded as they come (Home Assistant's own
/// Bluetooth stack dedupes what two adapters heard); the scanner runs while any adapter does,
/// and is active while any adapter scans actively.
public struct BluetoothProxy: Sendable {
    let server: APIServer
    let loop: EventLoop
    let adapters: GatewayAdapters
    /// The proxy's scan on each adapter's central (empty when it could not start).
    let scans: [ScanToken]
    let announcer: AvahiAnnouncer?
    /// Serves connections through the proxy (not handed to the server with `connection_slots` 0),
    /// and gives `bridge/health` the server's counters.
    let backend: ProxyBackend<ProxyBLECentral>
    /// Follow the adapters' states into BluetoothScannerStateResponse.
    let stateFollowers: [StateUpdatesToken]
    /// Follow the centrals' scan modes into BluetoothScannerStateResponse.
    let modeFollowers: [Int]

    /// The store of the key a client sets, with `provisioning` and no `encryption_key` (nil
    /// otherwise); provisioning without a state directory is a configuration error (a key kept in
    /// memory only would lock Home Assistant out after a restart).
    static func keyStore(_ settings: BluetoothProxySettings, stateDirectory: String?) throws -> APIKeyStore? {
        guard settings.provisioning, settings.encryptionKey == nil else { return nil }
        guard let stateDirectory else {
            throw RunFailure(
                "bluetooth_proxy.provisioning needs a state directory (state_directory or --state-dir) to keep the "
                    + "key Home Assistant sets", isConfiguration: true)
        }
        do {
            try LocalFile.createDirectories(stateDirectory)
        } catch {
            throw RunFailure("bluetooth_proxy.provisioning: \(error)", isConfiguration: false)
        }
        return APIKeyStore(directory: stateDirectory)
    }

    /// The key new sessions start with: the config file's, else the stored one (provisioning),
    /// else the all-zero key (unprovisioned); nil: plaintext.
    static func encryption(_ settings: BluetoothProxySettings, keyStore: APIKeyStore?, log: GatewayLogger)
        -> APITransport.Encryption
    {
        if let key = settings.encryptionKey { return .noise(psk: key) }
        guard let keyStore else { return .plaintext }
        let (stored, problem) = keyStore.load()
        if let problem { log(.warning, "Bluetooth proxy: \(problem)") }
        return .noise(psk: stored ?? APIKey.zero)
    }

    /// Starts the listener, then the scan that feeds it. A listener that cannot bind is an error;
    /// a scan that cannot start is a warning (the server still answers, with no advertisements).
    /// Connections through the proxy are `backend`'s, the gateway's attachment.
    static func start(
        config: GatewayConfig, adapters: GatewayAdapters, backend: ProxyBackend<ProxyBLECentral>,
        keyStore: APIKeyStore? = nil, loop: EventLoop, log: GatewayLogger
    ) async throws -> BluetoothProxy {
        let settings = config.bluetoothProxy
        let centrals = adapters.centrals
        let mac = (await adapters.primary.adapterAddress)?.description ?? "00:00:00:00:00:00"
        let name = settings.name ?? hostName()
        var configuration = APIServerConfiguration(
            host: settings.host, port: settings.port,
            encryption: encryption(settings, keyStore: keyStore, log: log),
            name: name, friendlyName: name, macAddress: mac, bluetoothMacAddress: mac, version: BuildInfo.version,
            maxClients: settings.maxClients, connectionSlots: settings.connectionSlots)
        configuration.provisioning = keyStore != nil
        configuration.plaintextWhileUnprovisioned = settings.plaintext
        let initial = configuration
        let connections = settings.connectionSlots > 0 ? backend : nil
        await connections?.start()
        let server = try await loop.submit {
            let server = APIServer(configuration: initial, loop: loop, backend: connections, keyStore: keyStore) {
                level, line in
                switch level {
                case .debug: log(.debug, line)
                case .info: log(.info, line)
                case .notice: log(.notice, line)
                case .warning: log(.warning, line)
                case .error: log(.error, line)
                }
            }
            try server.start()
            backend.assumeLoopIsolated { $0.serve(server) }
            return server
        }
        let port = try await loop.submit { server.port }
        let mode: String
        switch configuration.encryption {
        case .plaintext: mode = "plaintext"
        case .noise where configuration.provisionable:
            mode =
                "unprovisioned: Noise with the all-zero key\(settings.plaintext ? " (and plaintext)" : "") until a "
                + "client such as Home Assistant sets a key"
        case .noise where keyStore != nil: mode = "Noise encryption, the key a client set (\(keyStore?.path ?? ""))"
        case .noise: mode = "Noise encryption"
        }
        log(.notice, "Bluetooth proxy: ESPHome API on \(settings.host):\(port) as \"\(name)\" (\(mode))")
        // The proxy's scan starts in the configured mode (auto rests passive); a client's
        // BluetoothScannerSetModeRequest switches it, and the true mode (active while any scan
        // of a central needs it, or always on the D-Bus path) goes to the clients.
        let configured: BluetoothScannerMode = config.bluetooth.scanMode == .active ? .active : .passive
        var tokens: [ScanToken] = []
        do {
            let options = ScanOptions(allowDuplicates: true, mode: configured == .active ? .active : .passive)
            for central in centrals {
                tokens.append(
                    try await central.scan(options, waitingForAdapter: true) { result in
                        // On the loop thread, inside the handling of the report.
                        server.forward(Self.rawAdvertisement(result))
                    })
            }
        } catch {
            log(.warning, "Bluetooth proxy: cannot scan: \(error)")
            for (central, token) in zip(centrals, tokens) { await central.stopScan(token) }
            tokens = []
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
        // Every adapter powered off (or bluetoothd gone) stops the scan: clients see the scanner
        // stopped, and running again when discovery is re-armed on one. Told by the centrals on
        // the loop thread, where the server lives.
        let scanning = !tokens.isEmpty
        var stateFollowers: [StateUpdatesToken] = []
        for central in centrals {
            stateFollowers.append(
                await central.stateUpdates { _ in
                    let on = centrals.contains { $0.assumeLoopIsolated { $0.state == .poweredOn } }
                    server.scannerState = on ? (scanning ? .running : .failed) : .stopped
                })
        }
        let scanTokens = Array(zip(centrals, tokens))
        let modeFollowers = try await loop.submit {
            // Active while any adapter scans actively; nil (no scan now) everywhere: the last mode stays.
            @Sendable func follow() {
                let modes = centrals.compactMap { $0.assumeLoopIsolated { $0.scanMode } }
                guard !modes.isEmpty else { return }
                server.scannerMode = modes.contains(.active) ? .active : .passive
            }
            server.configuredScannerMode = configured
            server.scannerMode = configured
            follow()
            server.scannerModeRequested = { mode in
                for (central, token) in scanTokens {
                    central.assumeLoopIsolated { $0.setScanMode(mode == .active ? .active : .passive, for: token) }
                }
            }
            return centrals.map { central in central.assumeLoopIsolated { $0.scanModeUpdates { _ in follow() } } }
        }
        if let announcer {
            _ = try? await loop.submit { server.keyChanged = { announcer.update($0) } }
        }
        return BluetoothProxy(
            server: server, loop: loop, adapters: adapters, scans: tokens, announcer: announcer, backend: backend,
            stateFollowers: stateFollowers, modeFollowers: modeFollowers)
    }

    /// One report as ESPHome sends it: the address as a 48-bit number, its type (0 public,
    /// 1 random), the RSSI (-127 when none) and the AD bytes — the controller's own on the
    /// management path (``ScanResult/kernelReport``), rebuilt from BlueZ's merged properties on
    /// the D-Bus path.
    static func rawAdvertisement(_ result: ScanResult) -> ServerMessage.RawAdvertisement {
        if let found = result.kernelReport {
            return ServerMessage.RawAdvertisement(
                address: found.address.rawValue, rssi: found.rssi == 127 ? -127 : Int32(found.rssi),
                addressType: found.addressType == .leRandom ? 1 : 0, data: found.data)
        }
        return ServerMessage.RawAdvertisement(
            address: result.peripheral.address.rawValue, rssi: Int32(result.rssi ?? -127),
            addressType: result.peripheral.addressType == .random ? 1 : 0,
            data: AdvertisementBytes.build(result.advertisementData))
    }

    /// Runs the proxy's background work until ``stop()`` (or until the calling task is
    /// cancelled): the mDNS announcer.
    func run() async {
        await announcer?.run()
    }

    /// Says goodbye to the clients and closes the listener (their connections through the proxy
    /// are disconnected in BlueZ), stops the scan and withdraws the mDNS announcement; returns
    /// once the disconnects and the withdrawal are done. Cancelling the calling task (the stop's
    /// deadline) ends what is still waited for: the BlueZ and Avahi calls are cancelled.
    public func stop() async {
        let centrals = adapters.centrals
        let (stateFollowers, modeFollowers) = (self.stateFollowers, self.modeFollowers)
        _ = try? await loop.submit { [server] in
            for (index, central) in centrals.enumerated() {
                central.assumeLoopIsolated {
                    if stateFollowers.indices.contains(index) { $0.stopStateUpdates(stateFollowers[index]) }
                    if modeFollowers.indices.contains(index) { $0.stopScanModeUpdates(modeFollowers[index]) }
                }
            }
            server.scannerModeRequested = nil
            server.keyChanged = nil
            server.stop()
        }
        async let withdrawn: Void? = announcer?.withdraw()
        for (central, scan) in zip(centrals, scans) { await central.stopScan(scan) }
        await backend.stop()
        _ = await withdrawn
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
