import EventLoop
import Gateway
import GatewayRuntime
import MQTT

#if canImport(Glibc)
    import Glibc
#endif

/// The broker check of `gattway doctor`: one MQTT connection with the configured server,
/// protocol, credentials and TLS files, bounded by ``timeout``, then a clean DISCONNECT.
///
/// It uses its own client id (`<client_id>-doctor-<pid>`) and no last will, so checking a broker
/// while the service runs neither kicks the service's session off the broker nor marks its
/// bridge offline.
struct BrokerDiagnosis {
    let config: GatewayConfig
    let timeout: Duration
    let loop: EventLoop

    func run() async -> DoctorCheck {
        let settings = config.mqtt
        var configuration: MQTTConfiguration
        do {
            configuration = try MQTTService.configuration(config)
        } catch {
            return .fail("broker", "\(settings.server): \(error)", "check mqtt.server and mqtt.tls in the config")
        }
        configuration.will = nil
        configuration.clientID = "\(settings.clientID)-doctor-\(getpid())"
        let endpoint = "\(configuration.host):\(configuration.port)"
        let client: MQTTClient
        do {
            client = try MQTTClient(configuration: configuration, loop: loop)
        } catch {
            return .fail("broker", "\(settings.server): \(error)", "check the mqtt section of the config")
        }
        let attempt = Task { () async -> MQTTError? in
            do throws(MQTTError) {
                try await client.connect()
                return nil
            } catch {
                return error
            }
        }
        // Ending the client ends a connect that hangs (a host that drops packets, a TLS stall).
        let timer = Task { () async -> Bool in
            try? await Task.sleep(for: timeout)
            if Task.isCancelled { return false }
            await client.disconnect()
            return true
        }
        let failure = await attempt.value
        timer.cancel()
        let timedOut = await timer.value
        await client.disconnect()
        guard let failure else {
            let who = settings.username.map { " as \($0)" } ?? " anonymously"
            let tls = settings.tls == nil ? "" : " over TLS"
            return .ok(
                "broker", "connected to \(endpoint)\(tls)\(who) (MQTT \(settings.protocolVersion == 5 ? "5" : "3.1.1"))"
            )
        }
        return Self.explain(
            failure, endpoint: endpoint, settings: settings, timedOut: timedOut,
            seconds: Int(timeout.components.seconds))
    }

    static func explain(_ error: MQTTError, endpoint: String, settings: MQTTSettings, timedOut: Bool, seconds: Int)
        -> DoctorCheck
    {
        if timedOut {
            return .fail(
                "broker", "broker \(endpoint) did not answer within \(seconds) s",
                "check mqtt.server, the network and any firewall between here and the broker")
        }
        switch error.kind {
        case .refused(let reason):
            let text = "\(reason)"
            let said =
                text.prefix(1).lowercased() + text.dropFirst() + " (reason 0x\(String(reason.rawValue, radix: 16)))"
            let credentials =
                settings.username == nil
                ? "the config has no mqtt.username: the broker may not allow anonymous clients"
                : "check mqtt.username/password"
            switch reason {
            case .notAuthorized, .badUsernameOrPassword:
                return .fail("broker", "broker \(endpoint) refused the connection: \(said)", credentials)
            case .unsupportedProtocolVersion:
                return .fail(
                    "broker", "broker \(endpoint) refused the connection: \(said)",
                    "set mqtt.protocol to \(settings.protocolVersion == 5 ? "\"3.1.1\"" : "\"5\"")")
            default:
                return .fail("broker", "broker \(endpoint) refused the connection: \(said)", "see the broker's log")
            }
        case .tls:
            return .fail(
                "broker", "TLS with \(endpoint) failed: \(error)",
                "check mqtt.tls.ca_file (and certificate_file/key_file), and that the server name matches the certificate"
            )
        case .invalidConfiguration:
            return .fail("broker", "\(error)", "check the mqtt section of the config")
        default:
            let found =
                error.message.contains("Connection refused")
                ? "nothing accepts connections at \(endpoint) (connection refused)"
                : "cannot connect to \(endpoint): \(error)"
            return .fail(
                "broker", found,
                "is the broker running and listening there? (sudo systemctl status mosquitto; mosquitto_sub -h HOST -p PORT -t '#' -v)"
            )
        }
    }
}
