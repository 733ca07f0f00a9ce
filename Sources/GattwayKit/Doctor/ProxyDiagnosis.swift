import DBus
import ESPHomeAPI
import EventLoop
import Gateway
import GatewayRuntime

/// The Bluetooth proxy checks of `gattway doctor` (when `bluetooth_proxy.enabled`):
/// - `proxy`: the running gattway's ESPHome API answers on the configured address, with the
///   configured key (Noise handshake, Hello, DeviceInfo: the same steps as Home Assistant);
/// - `avahi`: avahi-daemon is on the system bus, and under which name the proxy is announced: the
///   configured one, or Avahi's alternative (`name #2`, …) when another device on the network
///   has that name (a warning: Home Assistant tells ESPHome devices apart by name);
/// - `api key`: a key is set, in the config file or (`provisioning`) by a client; plaintext and
///   an unprovisioned proxy are warnings.
struct ProxyDiagnosis {
    let settings: BluetoothProxySettings
    /// Where a key set by a client is kept (`provisioning`).
    var stateDirectory: String?
    let timeout: Duration
    let loop: EventLoop

    func run() async -> [DoctorCheck] {
        guard settings.enabled else { return [] }
        let (proxy, mac) = await listener()
        return [proxy, await avahi(mac: mac), key()]
    }

    private var seconds: Double {
        let (whole, attoseconds) = timeout.components
        return Double(whole) + Double(attoseconds) / 1e18
    }

    /// The check, and the running proxy's MAC when it answered (its TXT record's `mac`).
    private func listener() async -> (DoctorCheck, String?) {
        // The wildcard address is reached through loopback.
        let host = settings.host == "0.0.0.0" ? "127.0.0.1" : settings.host
        let endpoint = "\(settings.host):\(settings.port)"
        let (psk, limit) = (probeKey, seconds)
        let port = settings.port
        let result = await Task.detached { APIProbe.run(host: host, port: port, psk: psk, timeout: limit) }.value
        switch result {
        case .success(let answer):
            let features = String(answer.bluetoothProxyFeatures, radix: 16)
            let check = DoctorCheck.ok(
                "proxy",
                "ESPHome API on \(endpoint) answers as \"\(answer.name)\" (\(answer.serverInfo), API "
                    + "\(answer.apiVersion.major).\(answer.apiVersion.minor), proxy features 0x\(features))"
                    + (settings.encryptionKey == nil ? "" : "; the configured encryption_key is accepted"))
            return (check, answer.macAddress.isEmpty ? nil : answer.macAddress)
        case .failure(.unreachable(let text)):
            return (
                .warn(
                    "proxy", "nothing answers on \(endpoint) (\(text))",
                    "is gattway run running? sudo systemctl start gattway; it listens once the adapter is powered on"),
                nil
            )
        case .failure(.keyRefused(let text)):
            return (
                .fail(
                    "proxy", "\(endpoint) refuses the configured encryption_key (\(text))",
                    "the running gattway has another key: sudo systemctl restart gattway after editing the config"),
                nil
            )
        case .failure(.wrongEncryption(let text)):
            return (
                .fail("proxy", "\(endpoint): \(text)", "sudo systemctl restart gattway after editing the config"), nil
            )
        case .failure(.protocolError(let text)):
            return (
                .fail(
                    "proxy", "\(endpoint) does not speak the ESPHome API as expected: \(text)",
                    "is another program on port \(settings.port)? ss -ltnp | grep \(settings.port)"),
                nil
            )
        }
    }

    /// avahi-daemon on the system bus; with the proxy's MAC (it answered), the name it is
    /// announced under: Avahi resolves the configured name, and while that is another device's
    /// (its TXT `mac` differs) the alternatives Avahi would have chosen, as many as gattway tries.
    private func avahi(mac: String?) async -> DoctorCheck {
        let fix =
            "sudo apt install avahi-daemon (Home Assistant then discovers the proxy), or add it in Home "
            + "Assistant by address, port \(settings.port)"
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.connect(to: .system, on: loop)
        } catch {
            return .warn("avahi", "not checked: no system bus (\(error))", fix)
        }
        defer { Task { await connection.close() } }
        let version: String
        do {
            let reply = try await connection.call(
                destination: AvahiAnnouncer.service, path: "/", interface: AvahiAnnouncer.serverInterface,
                method: "GetVersionString", timeout: timeout)
            version = reply.first?.string ?? "avahi-daemon"
        } catch {
            return .warn(
                "avahi", "avahi-daemon is not reachable on the system bus (\(error)): no mDNS announcement", fix)
        }
        let name = settings.name ?? BluetoothProxy.hostName()
        let type = AvahiAnnouncer.serviceType
        guard let mac = mac.map(Self.txtMAC) else {
            return .ok("avahi", "\(version) on the system bus (the announcement not checked: the proxy did not answer)")
        }
        let rename =
            "set bluetooth_proxy.name to a name no other device on the network uses (Home Assistant tells ESPHome "
            + "devices apart by name), then sudo systemctl restart gattway"
        var candidate = name
        var others: [String] = []
        for _ in 0...AvahiAnnouncer.maximumAlternatives {
            guard let found = await resolve(candidate, on: connection) else { break }
            if found.mac == mac {
                if candidate == name {
                    return .ok("avahi", "\(version) on the system bus: the proxy is announced as \(type) \"\(name)\"")
                }
                return .warn(
                    "avahi",
                    "the proxy is announced as \(type) \"\(candidate)\", not \"\(name)\": "
                        + others.joined(separator: ", "), rename)
            }
            others.append("\"\(candidate)\" is \(found.host) (MAC \(found.mac))")
            guard
                let next = try? await connection.call(
                    destination: AvahiAnnouncer.service, path: "/", interface: AvahiAnnouncer.serverInterface,
                    method: "GetAlternativeServiceName", arguments: [.string(candidate)], timeout: timeout
                ).first?.string
            else { break }
            candidate = next
        }
        if others.isEmpty {
            return .warn(
                "avahi", "\(version) runs, but nothing is announced as \(type) \"\(name)\"",
                "the log of gattway run says why (journalctl -u gattway | grep mDNS)")
        }
        return .warn(
            "avahi",
            "the proxy is not announced by mDNS: " + others.joined(separator: ", ")
                + " (gattway's log says which names it tried)", rename)
    }

    /// 12 lower-case hex digits, as in the TXT record.
    static func txtMAC(_ address: String) -> String {
        address.lowercased().filter { $0 != ":" }
    }

    /// Avahi's `ResolveService` of the proxy's service type under `name` (IPv4): the host and the
    /// TXT `mac`, or nil when nothing answers within the timeout.
    private func resolve(_ name: String, on connection: DBusConnection) async -> (host: String, mac: String)? {
        guard
            let reply = try? await connection.call(
                destination: AvahiAnnouncer.service, path: "/", interface: AvahiAnnouncer.serverInterface,
                method: "ResolveService",
                arguments: [
                    .int32(-1), .int32(0), .string(name), .string(AvahiAnnouncer.serviceType), .string(""),
                    .int32(-1), .uint32(0),
                ], timeout: timeout),
            reply.count >= 10
        else { return nil }
        let txt = (reply[9].array ?? []).compactMap { $0.bytes.map { String(decoding: $0, as: UTF8.self) } }
        let mac = txt.first { $0.hasPrefix("mac=") }.map { String($0.dropFirst(4)) } ?? "none"
        return (reply[5].string ?? "?", mac)
    }

    /// The stored key with `provisioning` (nil: none, or no state directory).
    private var storedKey: [UInt8]? {
        guard settings.provisioning, settings.encryptionKey == nil, let stateDirectory else { return nil }
        return APIKeyStore(directory: stateDirectory).load().key
    }

    /// The key the running proxy should accept: the config file's, the stored one, or the
    /// all-zero one of an unprovisioned proxy.
    private var probeKey: [UInt8]? {
        if let key = settings.encryptionKey { return key }
        guard settings.provisioning else { return nil }
        return storedKey ?? APIKey.zero
    }

    private func key() -> DoctorCheck {
        if settings.encryptionKey != nil {
            return .ok(
                "api key", "bluetooth_proxy.encryption_key is set (Noise encryption; give Home Assistant the same key)")
        }
        if settings.provisioning {
            guard let stateDirectory else {
                return .fail(
                    "api key", "bluetooth_proxy.provisioning without a state directory",
                    "set state_directory (or run with --state-dir): the key Home Assistant sets is kept there")
            }
            if storedKey != nil {
                return .ok(
                    "api key",
                    "a key set by a client is kept in \(APIKeyStore(directory: stateDirectory).path) (gattway proxy "
                        + "reset-key forgets it)")
            }
            return .warn(
                "api key",
                "unprovisioned (bluetooth_proxy.provisioning, no key yet): anyone who reaches port \(settings.port) "
                    + "can set the key",
                "add the proxy in Home Assistant 2026.8 or later now, or set bluetooth_proxy.encryption_key")
        }
        return .warn(
            "api key",
            "bluetooth_proxy.plaintext: anyone who reaches port \(settings.port) reads every advertisement",
            "set bluetooth_proxy.encryption_key (openssl rand -base64 32) unless the network is trusted")
    }
}
