import Bluetooth
import Gateway
import JSON
import Testing

@Suite("peripheral role: config, serving, MQTT → characteristic, writes → MQTT, advertising")
struct PeripheralTests {
    static let thermometer = """
        {"role": "peripheral",
         "peripheral": {
           "advertising": {"local_name": "gw", "solicit_uuids": ["1805"],
                           "service_data": [{"uuid": "FCD2", "from_topic": "beacon/data", "value": "4000"}]},
           "services": [
             {"uuid": "181A", "characteristics": [
               {"uuid": "2A6E", "properties": ["read", "notify"], "from_topic": "gattway/thermo/state",
                "json_key": "temperature", "encoding": "s16le", "scale": 100, "value": 20},
               {"uuid": "2A6F", "properties": ["read"], "from_topic": "home/humidity", "encoding": "u16le", "scale": 100}
             ]},
             {"uuid": "12345678-1234-5678-1234-56789abcdef0", "characteristics": [
               {"uuid": "12345678-1234-5678-1234-56789abcdef1", "properties": ["read", "write", "write-without-response"],
                "to_topic": "phone/lamp", "encoding": "u8", "value": 0}
             ]}
           ]}}
        """
    static let temperature = PeripheralCharacteristicID(service: 0, characteristic: 0)
    static let humidity = PeripheralCharacteristicID(service: 0, characteristic: 1)
    static let lamp = PeripheralCharacteristicID(service: 1, characteristic: 0)

    @Test(
        "role peripheral serves the configured tree with initial values, advertises, follows its topics and never scans"
    )
    func serves() async throws {
        let harness = try Harness(Self.thermometer)
        try await harness.start()
        let services = try #require(harness.peripheral.services)
        #expect(
            services.map(\.uuid) == [BluetoothUUID(0x181A), BluetoothUUID("12345678-1234-5678-1234-56789abcdef0")!])
        #expect(services[0].characteristics[0].properties == [.read, .notify])
        #expect(services[0].characteristics[0].value == [0xD0, 0x07], "20 °C × 100 = 2000 = 0x07D0, little endian")
        #expect(services[0].characteristics[1].value == [])
        #expect(services[1].characteristics[0].properties == [.read, .write, .writeWithoutResponse])
        let advertisement = try #require(harness.peripheral.advertisements.last ?? nil)
        #expect(advertisement.connectable)
        #expect(advertisement.data.localName == "gw")
        #expect(advertisement.solicitUUIDs == [BluetoothUUID(0x1805)])
        #expect(
            advertisement.data.serviceUUIDs == services.map(\.uuid), "service_uuids defaults to the served services")
        #expect(advertisement.data.serviceData[BluetoothUUID(0xFCD2)] == [0x40, 0x00])
        #expect(harness.mqtt.filters.contains("gattway/thermo/state"))
        #expect(harness.mqtt.filters.contains("home/humidity"))
        #expect(harness.mqtt.filters.contains("beacon/data"))
        #expect(harness.ble.scanFilters.isEmpty, "role peripheral does not scan")
    }

    @Test("role both scans and serves; role central ignores the peripheral port")
    func roles() async throws {
        let both = try Harness(
            Self.thermometer.replacingOccurrences(of: #""role": "peripheral""#, with: #""role": "both""#))
        try await both.start()
        #expect(both.ble.scanFilters.count == 1)
        #expect(both.peripheral.services != nil)
        let central = try Harness(#"{"devices": []}"#)
        try await central.start()
        #expect(central.ble.scanFilters.count == 1)
        #expect(central.peripheral.services == nil)
        #expect(central.peripheral.advertisements.isEmpty)
    }

    @Test(
        "an MQTT value becomes the characteristic's bytes and notifies once per change; a bad payload is counted and changes nothing"
    )
    func mqttToCharacteristic() async throws {
        let harness = try Harness(
            Self.thermometer.replacingOccurrences(
                of: #""role": "peripheral""#, with: #""health": {"interval": "60s"}, "role": "peripheral""#))
        try await harness.start()
        let state = "gattway/thermo/state"
        await harness.source(state, #"{"temperature": 21.57, "humidity": 40}"#)
        #expect(harness.peripheral.value(Self.temperature) == [0x6D, 0x08], "21.57 × 100 = 2157 = 0x086D")
        await harness.source(state, #"{"temperature": 21.57}"#)
        #expect(harness.peripheral.notified.count == 1, "the same value again does not notify")
        await harness.source(state, #"{"temperature": -5.5}"#)
        #expect(harness.peripheral.value(Self.temperature) == [0xDA, 0xFD], "-550 as s16le")
        await harness.source(state, #"{"humidity": 40}"#)
        await harness.source(state, "not json")
        await harness.source(state, #"{"temperature": 400}"#)
        #expect(
            harness.peripheral.value(Self.temperature) == [0xDA, 0xFD],
            "payloads that do not fit leave the value as it was")
        #expect(await harness.gateway.servedValue(Self.temperature) == [0xDA, 0xFD])
        await harness.source("home/humidity", "55.5")
        #expect(harness.peripheral.value(Self.humidity) == [0xAE, 0x15], "plain text 55.5 × 100 = 5550")
        await harness.advance(60)
        let health = try #require(harness.mqtt.payloads(on: "gattway/bridge/health").last.flatMap(json))
        #expect(health["dropped"]?["peripheral_value"] == .number(3))
        #expect(health["peripheral"]?["updates"] == .number(3))
        #expect(health["peripheral"]?["advertising"] == .bool(true))
    }

    @Test("a message reaching the gateway's subscription updates the value (the started loop, not a direct call)")
    func subscriptionLoop() async throws {
        let harness = try Harness(Self.thermometer)
        try await harness.start()
        harness.mqtt.inject(MQTTInboundMessage(topic: "home/humidity", payload: Array("12".utf8)))
        await harness.settle()
        #expect(harness.peripheral.value(Self.humidity) == [0xB0, 0x04])
    }

    @Test(
        "a central's write is published on to_topic with its address and decoded value and becomes the readable value")
    func writeToMQTT() async throws {
        let harness = try Harness(Self.thermometer)
        try await harness.start()
        let phone = BluetoothAddress("11:22:33:44:55:66")!
        harness.peripheral.send(.write(Self.lamp, value: [1], central: phone))
        let messages = await harness.mqtt.waitFor("phone/lamp")
        let payload = try #require(messages.first.flatMap { json($0.payloadText) })
        #expect(payload["central"] == .string("11:22:33:44:55:66"))
        #expect(payload["characteristic"] == .string("12345678-1234-5678-1234-56789abcdef1"))
        #expect(payload["value"] == .number(1))
        #expect(payload["hex"] == .string("01"))
        #expect(messages.first?.retain == false)
        #expect(await harness.gateway.servedValue(Self.lamp) == [1])
        #expect(harness.peripheral.value(Self.lamp) == [1], "the port serves the written value to the next read")
        harness.peripheral.send(.write(Self.lamp, value: [1, 2], central: nil))
        let second = await harness.mqtt.waitFor("phone/lamp", count: 2)
        let raw = try #require(json(second[1].payloadText))
        #expect(raw["value"] == .null, "two bytes are not a u8: the raw bytes only")
        #expect(raw["hex"] == .string("0102"))
        #expect(raw["central"] == .null)
    }

    @Test("advertised service data follows its topic; a refused advertisement keeps the previous one and is counted")
    func advertisingFromMQTT() async throws {
        let harness = try Harness(
            Self.thermometer.replacingOccurrences(
                of: #""role": "peripheral""#, with: #""health": {"interval": "60s"}, "role": "peripheral""#))
        try await harness.start()
        await harness.source("beacon/data", "40 02 ca 09")
        let advertisement = try #require(harness.peripheral.advertisements.last ?? nil)
        #expect(advertisement.data.serviceData[BluetoothUUID(0xFCD2)] == [0x40, 0x02, 0xCA, 0x09])
        #expect(advertisement.data.localName == "gw")
        harness.peripheral.failAdvertise(BLEPortError(.other, "Failed to parse advertisement."))
        await harness.source("beacon/data", String(repeating: "ff", count: 40))
        await harness.advance(60)
        let health = try #require(harness.mqtt.payloads(on: "gattway/bridge/health").last.flatMap(json))
        #expect(health["peripheral"]?["advertising_errors"] == .number(1))
        harness.peripheral.failAdvertise(nil)
        await harness.source("beacon/data", "4003")
        #expect(
            (harness.peripheral.advertisements.last ?? nil)?.data.serviceData[BluetoothUUID(0xFCD2)] == [0x40, 0x03])
    }

    @Test("a stack that refuses the services stops the start with the reason")
    func serveFailure() async throws {
        let harness = try Harness(Self.thermometer)
        harness.peripheral.failServe(
            BLEPortError(.unavailable, "org.bluez.Error.Failed: No valid service object found"))
        await #expect {
            try await harness.start()
        } throws: { error in
            "\(error)".contains("cannot serve the GATT services")
                && "\(error)".contains("No valid service object found")
        }
    }

    @Test("peripheral config problems are reported with their paths")
    func configProblems() {
        let text = """
            {"role": "peripheral", "devices": [{"match": {"services": ["180F"]}}],
             "peripheral": {"adapter": "bt0", "services": [
               {"uuid": "1800", "characteristics": [{"uuid": "2A00", "properties": ["read"]}]},
               {"uuid": "181A", "characteristics": [
                 {"uuid": "2A6E", "properties": ["write"], "from_topic": "a/+"},
                 {"uuid": "2A6F", "properties": ["read", "shout"], "to_topic": "x"},
                 {"uuid": "2A70", "properties": ["read"], "encoding": "hex", "scale": 10, "from_topic": "t"},
                 {"uuid": "2A71", "properties": ["read"], "encoding": "u8", "value": 300}
               ]}],
               "advertising": {"service_data": [{"uuid": "FCD2"}]}}}
            """
        let problems: [String]
        do {
            _ = try GatewayConfig.parse(Array(text.utf8))
            problems = []
        } catch {
            problems = error.lines
        }
        let expected = [
            "devices: role peripheral does not scan",
            "peripheral.adapter: \"bt0\" is not an adapter name",
            "peripheral.services[0].uuid: 1800 is provided by BlueZ itself",
            "peripheral.services[1].characteristics[0].from_topic: \"a/+\" is not a topic",
            "peripheral.services[1].characteristics[1].properties[1]: \"shout\" is not a property",
            "peripheral.services[1].characteristics[2].scale: needs a numeric encoding, not hex",
            "peripheral.services[1].characteristics[3].value: 300 is out of range for u8",
            "peripheral.advertising.service_data[0]: needs a value or a from_topic",
        ]
        for line in expected {
            #expect(problems.contains { $0.hasPrefix(line) }, "missing: \(line) in \(problems)")
        }
        #expect(throws: GatewayConfigError.self) { try GatewayConfig.parse(Array(#"{"role": "server"}"#.utf8)) }
        let centralWithSection = #"{"peripheral": {"services": []}}"#
        #expect(
            (try? GatewayConfig.parse(Array(centralWithSection.utf8))) == nil,
            "a peripheral section with role central is a mistake")
    }

    @Test("encodings turn written bytes back into the value that was encoded")
    func decoding() throws {
        let cases: [(ValueEncoding, JSONValue)] = [
            (.u8, .number(200)), (.s8, .number(-3)), (.u16le, .number(65_000)), (.s16be, .number(-1234)),
            (.u32be, .number(4_000_000_000)), (.s32le, .number(-70_000)), (.float32le, .number(1.5)),
            (.bool, .bool(true)),
            (.hex, .string("01ff")), (.base64, .string("Zm9vYmFy")), (.utf8, .string("héllo")),
            (.json, .object([("a", .number(1))])),
        ]
        for (encoding, value) in cases {
            #expect(encoding.decode(try encoding.encode(value)) == value, "\(encoding)")
        }
        #expect(ValueEncoding.base64.decode(Array("fo".utf8)) == .string("Zm8="))
        #expect(ValueEncoding.base64.decode(Array("f".utf8)) == .string("Zg=="))
        #expect(ValueEncoding.u16le.decode([1]) == nil)
        #expect(ValueEncoding.utf8.decode([0xFF, 0xFE]) == nil)
        #expect(ValueEncoding.bool.decode([7]) == nil)
    }
}
