import EventLoop
import Gateway
import MQTT
import Synchronization

/// The MQTT client of `gattway run` as a service: made and started at ``start()`` (it connects
/// and reconnects in the background, with `bridge/state` offline as its last will), disconnected
/// at the stop's last step (MQTT DISCONNECT: the broker then discards the last will). Any error
/// of the start is a configuration error (exit 78): the settings cannot make a client.
public final class MQTTService: Service {
    public let name = "MQTT"
    let config: GatewayConfig
    let loop: EventLoop
    let log: GatewayLogger
    private let made = Mutex<MQTTClient?>(nil)

    public init(config: GatewayConfig, loop: EventLoop, log: GatewayLogger) {
        self.config = config
        self.loop = loop
        self.log = log
    }

    /// The client, once ``start()`` made it.
    public var client: MQTTClient? { made.withLock { $0 } }

    public func start() async throws {
        let (config, log) = (self.config, self.log)
        do {
            let client = try MQTTClient(configuration: try Self.configuration(config), loop: loop)
            made.withLock { $0 = client }
            // Observed before the start (the registration reaches the loop ahead of it), so that a
            // first connection the broker refuses is logged too; told on the loop thread until
            // the client disconnects.
            client.observeConnectionStates { [weak client] state in
                Self.logConnection(state, client: client, config: config, log: log)
            }
            try await client.start()
        } catch {
            throw RunFailure("\(error)", isConfiguration: true)
        }
    }

    /// MQTT DISCONNECT, for at most the last step's time.
    public func stop(within deadline: StopDeadline) async -> String? {
        await client?.disconnect(timeout: min(deadline.closeLimit, deadline.closeRemaining))
        return nil
    }

    /// The largest packet the gateway takes from the broker (MQTT 5): its commands are at most
    /// `commands.max_payload_bytes` (≤ 256 KiB) and `from_topic` values are small state messages,
    /// so nothing it subscribes to needs more; a larger publication is dropped by the broker.
    public static let maximumInboundPacket: UInt32 = 1 << 20

    /// The MQTT client configuration from the gateway's settings, with the bridge's last will
    /// (also what `gattway doctor` connects with).
    public static func configuration(_ config: GatewayConfig) throws -> MQTTConfiguration {
        let settings = config.mqtt
        var configuration = try MQTTConfiguration(url: settings.server, clientID: settings.clientID)
        for url in settings.alternateServers { try configuration.addAlternate(url: url) }
        configuration.keepAlive = Int(saturating: settings.keepalive.rounded())
        configuration.maxQueued = settings.maxQueued
        configuration.protocolVersion = settings.protocolVersion == 5 ? .v5 : .v311
        if configuration.protocolVersion == .v5 { configuration.maximumPacketSize = Self.maximumInboundPacket }
        if let username = settings.username {
            configuration.credentials = MQTTCredentials(username: username, password: settings.password)
        }
        if let tls = settings.tls {
            configuration.tls = MQTTTLSConfiguration(
                caFile: tls.caFile, certificateFile: tls.certificateFile, keyFile: tls.keyFile,
                insecureSkipVerification: tls.insecure)
        }
        configuration.will = ClientMQTTPort.message(Gateway.lastWill(for: config))
        return configuration
    }

    /// The MQTT connection's changes in the log; called by the client on the loop thread.
    static func logConnection(
        _ state: MQTTConnectionState, client: MQTTClient?, config: GatewayConfig, log: GatewayLogger
    ) {
        switch state {
        case .connected:
            if config.mqtt.alternateServers.isEmpty {
                log(.notice, "MQTT: connected to \(config.mqtt.server)")
            } else if let endpoint = client?.assumeLoopIsolated({ $0.endpoint }) {
                log(.notice, "MQTT: connected to \(endpoint)")
            }
        case .disconnected(let error?, let retry):
            log(.warning, "MQTT: \(error)" + (retry.map { "; retrying in \(String(oneDecimal: $0)) s" } ?? ""))
        case .disconnected, .connecting: break
        }
    }
}
