import Bluetooth
import Gateway
import GatewayFakes
import JSON

/// A gateway wired to in-memory ports and a manual clock.
struct Harness {
    let config: GatewayConfig
    let ble = InMemoryBLE()
    let mqtt = InMemoryMQTT()
    let clock = ManualClock(wallMilliseconds: 1_796_058_000_000)
    let peripheral = InMemoryPeripheral()
    let gateway: Gateway

    /// Home Assistant discovery and `bridge/health` are off unless the config text names
    /// `homeassistant` / `health` (they add messages and hold first states back).
    init(_ configText: String, retryDelay: Double = 5, logger: GatewayLogger = .none, stateDirectory: String? = nil,
         processSample: @escaping @Sendable () -> ProcessSample? = { nil }) throws {
        var text = configText
        if let brace = text.firstIndex(of: "{") {
            var defaults: [String] = []
            if !text.contains("\"homeassistant\"") { defaults.append(#""homeassistant": {"enabled": false}"#) }
            if !text.contains("\"health\"") { defaults.append(#""health": {"enabled": false}"#) }
            let rest = text[text.index(after: brace)...].drop(while: { $0 == " " || $0 == "\n" })
            if !defaults.isEmpty {
                text = "{" + defaults.joined(separator: ", ") + (rest.hasPrefix("}") ? "" : ", ") + rest
            }
        }
        config = try GatewayConfig.parse(Array(text.utf8))
        gateway = Gateway(config: config, ble: ble, peripheral: peripheral, mqtt: mqtt, clock: clock,
                          reconnect: { FixedReconnectDelay(delay: retryDelay) }, logger: logger,
                          stateDirectory: stateDirectory, processSample: processSample)
    }

    func start() async throws {
        try await gateway.start()
    }

    /// Advances the clock and runs what is due.
    func advance(_ seconds: Double) async {
        clock.advance(by: seconds)
        await gateway.tick()
    }

    /// Sends a command as a client would and waits for its response on `responseTopic`.
    @discardableResult
    func command(_ topic: String, _ payload: String, responseTopic: String, correlation: [UInt8]? = nil,
                 mqtt5ResponseTopic: String? = nil) async -> [MQTTOutboundMessage] {
        let before = mqtt.messages(on: responseTopic).count
        await gateway.handle(MQTTInboundMessage(topic: topic, payload: Array(payload.utf8), responseTopic: mqtt5ResponseTopic,
                                                correlationData: correlation))
        await mqtt.waitFor(responseTopic, count: before + 1)
        await gateway.waitUntilIdle()
        return mqtt.messages(on: responseTopic)
    }
}

func address(_ text: String) -> BluetoothAddress {
    BluetoothAddress(text) ?? BluetoothAddress(rawValue: 0)
}

func json(_ text: String) -> JSONValue? { try? JSONValue.parse(Array(text.utf8)) }

/// A BTHome v2 advertisement: temperature 25.06 °C, humidity 50.55 %.
func bthome(_ address: BluetoothAddress, rssi: Int16 = -60, payload: [UInt8] = [0x40, 0x02, 0xCA, 0x09, 0x03, 0xBF, 0x13])
    -> BLEDiscovery
{
    BLEDiscovery(address: address, advertisement: AdvertisementData(serviceData: [BluetoothUUID(0xFCD2): payload], rssi: rssi))
}
