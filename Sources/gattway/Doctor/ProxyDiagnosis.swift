import DBus
import ESPHomeAPI
import EventLoop
import Gateway

/// The Bluetooth proxy checks of `gattway doctor` (when `bluetooth_proxy.enabled`):
/// - `proxy`: the running gattway's ESPHome API answers on the configured address, with the
///   configured key (Noise handshake, Hello, DeviceInfo: the same steps as Home Assistant);
/// - `avahi`: avahi-daemon is on the system bus, so the proxy is announced by mDNS;
/// - `api key`: a key is set (plaintext is a warning).
struct ProxyDiagnosis {
    let settings: BluetoothProxySettings
    let timeout: Duration
    let loop: EventLoop

    func run() async -> [DoctorCheck] {
        guard settings.enabled else { return [] }
        return [await listener(), await avahi(), key()]
    }

    private var seconds: Double {
        let (whole, attoseconds) = timeout.components
        return Double(whole) + Double(attoseconds) / 1e18
    }

    private func listener() async -> DoctorCheck {
        // The wildcard address is reached through loopback.
        let host = settings.host == "0.0.0.0" ? "127.0.0.1" : settings.host
        let endpoint = "\(settings.host):\(settings.port)"
        let (psk, limit) = (settings.encryptionKey, seconds)
        let port = settings.port
        let result = await Task.detached { APIProbe.run(host: host, port: port, psk: psk, timeout: limit) }.value
        switch result {
        case .success(let answer):
            let features = String(answer.bluetoothProxyFeatures, radix: 16)
            return .ok(
                "proxy",
                "ESPHome API on \(endpoint) answers as \"\(answer.name)\" (\(answer.serverInfo), API "
                    + "\(answer.apiVersion.major).\(answer.apiVersion.minor), proxy features 0x\(features))"
                    + (psk == nil ? "" : "; the configured encryption_key is accepted"))
        case .failure(.unreachable(let text)):
            return .warn(
                "proxy", "nothing answers on \(endpoint) (\(text))",
                "is gattway run running? sudo systemctl start gattway; it listens once the adapter is powered on")
        case .failure(.keyRefused(let text)):
            return .fail(
                "proxy", "\(endpoint) refuses the configured encryption_key (\(text))",
                "the running gattway has another key: sudo systemctl restart gattway after editing the config")
        case .failure(.wrongEncryption(let text)):
            return .fail("proxy", "\(endpoint): \(text)", "sudo systemctl restart gattway after editing the config")
        case .failure(.protocolError(let text)):
            return .fail(
                "proxy", "\(endpoint) does not speak the ESPHome API as expected: \(text)",
                "is another program on port \(settings.port)? ss -ltnp | grep \(settings.port)")
        }
    }

    private func avahi() async -> DoctorCheck {
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
        do {
            let reply = try await connection.call(
                destination: AvahiAnnouncer.service, path: "/", interface: "org.freedesktop.Avahi.Server",
                method: "GetVersionString", timeout: timeout)
            return .ok(
                "avahi",
                "\(reply.first?.string ?? "avahi-daemon") on the system bus: the proxy is announced as "
                    + AvahiAnnouncer.serviceType)
        } catch {
            return .warn(
                "avahi", "avahi-daemon is not reachable on the system bus (\(error)): no mDNS announcement", fix)
        }
    }

    private func key() -> DoctorCheck {
        if settings.encryptionKey != nil {
            return .ok(
                "api key", "bluetooth_proxy.encryption_key is set (Noise encryption; give Home Assistant the same key)")
        }
        return .warn(
            "api key",
            "bluetooth_proxy.plaintext: anyone who reaches port \(settings.port) reads every advertisement",
            "set bluetooth_proxy.encryption_key (openssl rand -base64 32) unless the network is trusted")
    }
}
