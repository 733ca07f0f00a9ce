import ESPHomeAPI
import Gateway
import MQTT
import Testing

@testable import GatewayRuntime

@Suite("The runtime's pure parts: the proxy's mDNS records, the MQTT client's settings, exit codes")
struct PureTests {
    static func apiConfiguration(_ encryption: APITransport.Encryption) -> APIServerConfiguration {
        APIServerConfiguration(
            host: "0.0.0.0", port: 6053, encryption: encryption, name: "kitchen", friendlyName: "Kitchen Proxy",
            macAddress: "00:AA:01:0B:0C:0D", bluetoothMacAddress: "00:AA:01:0B:0C:0D", version: "1.2.3", maxClients: 4,
            connectionSlots: 3)
    }

    @Test(
        "the announcement's TXT record is what Home Assistant reads of an ESPHome device: mac as 12 lower-case hex digits, names, versions; api_encryption only with a key"
    )
    func txtRecords() {
        let plaintext = AvahiAnnouncer.txt(Self.apiConfiguration(.plaintext))
        #expect(
            plaintext == [
                "friendly_name=Kitchen Proxy", "version=\(APIServer.esphomeVersion)", "mac=00aa010b0c0d",
                "platform=host", "board=gattway", "network=ethernet", "project_name=gattway.gattway",
                "project_version=1.2.3",
            ])
        let noise = AvahiAnnouncer.txt(Self.apiConfiguration(.noise(psk: [UInt8](repeating: 7, count: 32))))
        #expect(noise == plaintext + ["api_encryption=Noise_NNpsk0_25519_ChaChaPoly_SHA256"])
        #expect(AvahiAnnouncer.serviceType == "_esphomelib._tcp")
    }

    @Test(
        "the MQTT client's configuration: bridge/state offline as the last will, retained; MQTT 5 caps inbound packets at 1 MiB"
    )
    func mqttConfiguration() throws {
        let config = try GatewayConfig.parse(
            Array(#"{"mqtt": {"server": "mqtt://broker.local:1884", "base_topic": "home", "protocol": "5"}}"#.utf8))
        let configuration = try MQTTService.configuration(config)
        let will = try #require(configuration.will)
        #expect(will.topic == "home/bridge/state")
        #expect(will.payloadString == #"{"state":"offline"}"#)
        #expect(will.retain)
        #expect(configuration.protocolVersion == .v5)
        #expect(configuration.maximumPacketSize == 1 << 20)
        let v311 = try MQTTService.configuration(
            try GatewayConfig.parse(Array(#"{"mqtt": {"server": "mqtt://broker.local", "protocol": "3.1.1"}}"#.utf8)))
        #expect(v311.protocolVersion == .v311)
    }

    @Test("exit codes: a configuration error is 78, any other failure 1, decided from the error alone")
    func exitCodes() {
        #expect(ExitCode(for: RunFailure("unsupported scheme", isConfiguration: true)) == .config)
        #expect(ExitCode(for: RunFailure("bus gone", isConfiguration: false)) == .failure)
        #expect(ExitCode(for: GatewayStartError("advertisement needs 38 bytes", isConfiguration: true)) == .config)
        #expect(ExitCode(for: GatewayStartError("cannot scan")) == .failure)
        #expect(ExitCode(for: ExitCode.usage) == .usage)
        #expect(ExitCode(for: CancellationError()) == .failure)
    }
}
