import Gateway
import Testing

@Suite("config.json bluetooth_proxy")
struct BluetoothProxyConfigTests {
    static let key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

    @Test("off by default, with ESPHome's port and 4 clients")
    func defaults() throws {
        let proxy = try GatewayConfig.parse(Array("{}".utf8)).bluetoothProxy
        #expect(!proxy.enabled)
        #expect(proxy.host == "0.0.0.0" && proxy.port == 6053)
        #expect(proxy.maxClients == 4 && proxy.connectionSlots == 3)
        #expect(proxy.encryptionKey == nil && !proxy.plaintext && !proxy.provisioning)
    }

    @Test("provisioning: enabled without a key, alone or with plaintext; a configured key still read")
    func provisioning() throws {
        let alone = try GatewayConfig.parse(
            Array(#"{"bluetooth_proxy": {"enabled": true, "provisioning": true}}"#.utf8)
        ).bluetoothProxy
        #expect(alone.provisioning && alone.encryptionKey == nil && !alone.plaintext)
        let plain = try GatewayConfig.parse(
            Array(#"{"bluetooth_proxy": {"enabled": true, "provisioning": true, "plaintext": true}}"#.utf8)
        ).bluetoothProxy
        #expect(plain.provisioning && plain.plaintext)
        let keyed = """
            {"bluetooth_proxy": {"enabled": true, "provisioning": true, "encryption_key": "\(Self.key)"}}
            """
        #expect(try GatewayConfig.parse(Array(keyed.utf8)).bluetoothProxy.encryptionKey == Array(0..<32))
        #expect(throws: (any Error).self) {
            try GatewayConfig.parse(Array(#"{"bluetooth_proxy": {"enabled": true, "provisioning": "yes"}}"#.utf8))
        }
    }

    @Test("a key, a listen address and a name are read; the key is a secret")
    func full() throws {
        let text = """
            {"bluetooth_proxy": {"enabled": true, "listen": "127.0.0.1:16053", "name": "pi-proxy",
             "encryption_key": "\(Self.key)", "max_clients": 2, "connection_slots": 1}}
            """
        let config = try GatewayConfig.parse(Array(text.utf8))
        let proxy = config.bluetoothProxy
        #expect(proxy.enabled && proxy.host == "127.0.0.1" && proxy.port == 16053 && proxy.name == "pi-proxy")
        #expect(proxy.encryptionKey == Array(0..<32))
        #expect(config.secrets.contains(Self.key))
        #expect(config.holdsSecrets)
    }

    @Test("enabled without a key is refused unless plaintext is chosen; every problem is path-named")
    func problems() {
        #expect(throws: (any Error).self) {
            try GatewayConfig.parse(Array(#"{"bluetooth_proxy": {"enabled": true}}"#.utf8))
        }
        #expect(
            (try? GatewayConfig.parse(Array(#"{"bluetooth_proxy": {"enabled": true, "plaintext": true}}"#.utf8))) != nil
        )
        let text = """
            {"bluetooth_proxy": {"enabled": true, "listen": "localhost:6053", "encryption_key": "c2hvcnQ=",
             "max_clients": 0, "name": "a-name-that-is-far-too-long-for-esphome", "colour": 1}}
            """
        do {
            _ = try GatewayConfig.parse(Array(text.utf8))
            Issue.record("expected errors")
        } catch {
            let lines = error.lines.joined(separator: "\n")
            #expect(lines.contains("bluetooth_proxy.listen: \"localhost:6053\" is not an IPv4 address and port"))
            #expect(lines.contains("bluetooth_proxy.encryption_key: expected the base64 of 32 bytes"))
            #expect(lines.contains("bluetooth_proxy.max_clients: expected an integer from 1 to 64"))
            #expect(lines.contains("bluetooth_proxy.name: expected at most 31 characters"))
            #expect(lines.contains("bluetooth_proxy.encryption_key: is required when enabled"))
            #expect(lines.contains("bluetooth_proxy.colour: is not a known key"))
        }
        let both = #"{"bluetooth_proxy": {"plaintext": true, "encryption_key": "\#(Self.key)"}}"#
        #expect(throws: (any Error).self) { try GatewayConfig.parse(Array(both.utf8)) }
    }
}
