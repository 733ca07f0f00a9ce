import Bluetooth
import Gateway
import GatewayFakes
import JSON

extension FuzzTargets {
    /// The peripheral role's inputs: payloads on the configured `from_topic` topics (any client
    /// the broker lets publish there) and writes and subscriptions by any central in range, into
    /// a real ``Gateway`` in the peripheral role on in-memory ports. See ``PeripheralSourcesFuzz``.
    static let peripheralSources = FuzzTarget(
        name: "peripheral-sources",
        summary: "from_topic payloads and central writes into the peripheral role's served values and advertisement",
        seeds: { PeripheralSourcesFuzz.seeds },
        run: { PeripheralSourcesFuzz.run($0) })
}

/// The driver of ``FuzzTargets/peripheralSources``.
///
/// Encoding: config choice (u16), then up to 24 steps: an op byte — 0–2 a message (topic: u16
/// into the config's source topics, past them a string; payload chunk), 3 a central's write
/// (service and characteristic position bytes, which may be out of range; value chunk; central
/// flag), 4 a subscription or unsubscription (positions, flag).
///
/// Properties, against a model of what the config says (``PeripheralValueSource/bytes(from:)``
/// per source): no trap; a value that does not fit leaves the previous value and is counted
/// (`dropped.peripheral_value` of `bridge/health`); values are served (by the gateway and on the
/// port) only for configured characteristics, and are what the model expects; the advertisement
/// carries only what the config names (name, service UUIDs, manufacturer and service data keys)
/// with the expected bytes.
enum PeripheralSourcesFuzz {
    static let configTexts: [String] = [
        // Tests/GatewayTests/PeripheralTests.swift's thermometer.
        """
        {"role": "peripheral", "health": {"interval": "60s"}, "homeassistant": {"enabled": false},
         "peripheral": {
           "advertising": {"local_name": "gw", "service_data": [{"uuid": "FCD2", "from_topic": "beacon/data", "value": "4000"}]},
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
        """,
        // docs/config.md's example.
        """
        {"role": "peripheral", "health": {"interval": "60s"}, "homeassistant": {"enabled": false},
         "peripheral": {
           "advertising": {"local_name": "gattway"},
           "services": [
             {"uuid": "181A", "characteristics": [
               {"uuid": "2A6E", "properties": ["read", "notify"], "from_topic": "gattway/livingroom/state",
                "json_key": "temperature", "encoding": "s16le", "scale": 100}]},
             {"uuid": "6e400001-b5a3-f393-e0a9-e50e24dcca9e", "characteristics": [
               {"uuid": "6e400002-b5a3-f393-e0a9-e50e24dcca9e", "properties": ["write", "write-without-response"],
                "to_topic": "gattway/peripheral/lamp", "encoding": "u8"}]}
           ]}}
        """,
        // Every encoding, one topic feeding several characteristics, manufacturer and service
        // data from topics, a broadcast-only advertisement with TX power and appearance.
        """
        {"role": "peripheral", "health": {"interval": "60s"}, "homeassistant": {"enabled": false},
         "peripheral": {
           "advertising": {"connectable": false, "local_name": "multi", "tx_power": -4, "appearance": 832,
                           "service_uuids": ["FFF0"],
                           "manufacturer_data": [{"company_id": 1177, "from_topic": "adv/m", "encoding": "hex", "value": "01"},
                                                 {"company_id": 76, "value": "0215"}],
                           "service_data": [{"uuid": "FCD2", "from_topic": "adv/s", "json_key": "b", "encoding": "base64"},
                                            {"uuid": "181A", "from_topic": "multi/state", "json_key": "t", "encoding": "s16be",
                                             "scale": 10}]},
           "services": [
             {"uuid": "FFF0", "characteristics": [
               {"uuid": "FFF1", "properties": ["read", "notify"], "from_topic": "multi/state", "json_key": "t",
                "encoding": "float32le", "scale": 0.5},
               {"uuid": "FFF2", "properties": ["read"], "from_topic": "multi/state", "json_key": "on", "encoding": "bool"},
               {"uuid": "FFF3", "properties": ["read", "indicate"], "from_topic": "multi/text", "encoding": "utf8", "value": "hi"},
               {"uuid": "FFF4", "properties": ["read"], "from_topic": "multi/raw", "encoding": "hex"},
               {"uuid": "FFF5", "properties": ["read", "notify"], "from_topic": "multi/json", "encoding": "json"},
               {"uuid": "FFF6", "properties": ["read"], "from_topic": "multi/state", "json_key": "n", "encoding": "u32be"},
               {"uuid": "FFF7", "properties": ["read", "write"], "to_topic": "multi/written", "encoding": "s8"},
               {"uuid": "FFF8", "properties": ["write-without-response"], "to_topic": "multi/written", "encoding": "json"}
             ]},
             {"uuid": "FFE0", "characteristics": [
               {"uuid": "FFE1", "properties": ["read", "write"], "from_topic": "multi/b64", "encoding": "base64",
                "to_topic": "multi/echo"}
             ]}
           ]}}
        """,
    ]

    static let configs: [GatewayConfig] = configTexts.map { text in
        do { return try GatewayConfig.parse(Array(text.utf8)) } catch {
            fatalError("peripheral-sources config: \(error)")
        }
    }

    /// One step of an input.
    enum Step: Sendable {
        case message(topic: String, payload: [UInt8])
        case write(PeripheralCharacteristicID, [UInt8], central: BluetoothAddress?)
        case subscription(PeripheralCharacteristicID, on: Bool)
    }

    static func run(_ bytes: [UInt8]) {
        var input = FuzzInput(bytes)
        let config = configs[input.index(configs.count)]
        let topics = config.peripheral.sourceTopics
        var steps: [Step] = []
        while !input.isEmpty, steps.count < 24 {
            switch input.byte() % 5 {
            case 0...2:
                let choice = input.index(topics.count + 1)
                let topic = choice < topics.count ? topics[choice] : input.string(limit: 30)
                steps.append(.message(topic: topic, payload: input.chunk()))
            case 3:
                let id = PeripheralCharacteristicID(
                    service: Int(input.byte() % 4), characteristic: Int(input.byte() % 10))
                let value = input.chunk(limit: 64)
                let central = input.bool() ? BluetoothAddress(rawValue: 0x1122_3344_5566) : nil
                steps.append(.write(id, value, central: central))
            default:
                let id = PeripheralCharacteristicID(
                    service: Int(input.byte() % 4), characteristic: Int(input.byte() % 10))
                steps.append(.subscription(id, on: input.bool()))
            }
        }
        let decoded = steps
        let outcome = LoopDriver.run { await drive(config, decoded) }
        fuzzProperty(outcome == .finished, "peripheral-sources: the driver never finished")
    }

    static func drive(_ config: GatewayConfig, _ steps: [Step]) async {
        let settings = config.peripheral
        let port = InMemoryPeripheral()
        let mqtt = InMemoryMQTT()
        let clock = ManualClock()
        let loop = LoopDriver.loop
        let gateway = Gateway(
            config: config, ble: InMemoryBLE(), peripheral: port, mqtt: mqtt, clock: clock, loop: loop,
            logger: .none, processSample: { nil })
        let jobs = Task(executorPreference: loop.taskExecutor) { await gateway.run() }
        do { try await gateway.start() } catch { fuzzProperty(false, "peripheral-sources: no start: \(error)") }
        // The model: every configured characteristic's value, the MQTT-fed advertising data.
        var expected: [PeripheralCharacteristicID: [UInt8]] = [:]
        var ids: [PeripheralCharacteristicID] = []
        for (serviceIndex, service) in settings.services.enumerated() {
            for (index, characteristic) in service.characteristics.enumerated() {
                let id = PeripheralCharacteristicID(service: serviceIndex, characteristic: index)
                ids.append(id)
                expected[id] = characteristic.initialValue
            }
        }
        var manufacturer = settings.advertising.manufacturerData.map(\.data.initialValue)
        var serviceData = settings.advertising.serviceData.map(\.data.initialValue)
        var errors = 0
        for step in steps {
            switch step {
            case .message(let topic, let payload):
                for (serviceIndex, service) in settings.services.enumerated() {
                    for (index, characteristic) in service.characteristics.enumerated() {
                        guard let source = characteristic.source, source.topic == topic else { continue }
                        do throws(CommandError) {
                            expected[PeripheralCharacteristicID(service: serviceIndex, characteristic: index)] =
                                try source.bytes(from: payload)
                        } catch {
                            errors += 1
                        }
                    }
                }
                var fed = (manufacturer, serviceData)
                for (index, entry) in settings.advertising.manufacturerData.enumerated() {
                    guard let source = entry.data.source, source.topic == topic else { continue }
                    do throws(CommandError) { fed.0[index] = try source.bytes(from: payload) } catch { errors += 1 }
                }
                for (index, entry) in settings.advertising.serviceData.enumerated() {
                    guard let source = entry.data.source, source.topic == topic else { continue }
                    do throws(CommandError) { fed.1[index] = try source.bytes(from: payload) } catch { errors += 1 }
                }
                (manufacturer, serviceData) = fed
                await gateway.handle(peripheralSource: MQTTInboundMessage(topic: topic, payload: payload))
            case .write(let id, let value, let central):
                if ids.contains(id), settings.services[id.service].characteristics[id.characteristic].source == nil {
                    expected[id] = value
                }
                await gateway.handle(PeripheralPortEvent.write(id, value: value, central: central))
            case .subscription(let id, let on):
                let event: PeripheralPortEvent = on ? .subscribed(id, central: nil) : .unsubscribed(id, central: nil)
                await gateway.handle(event)
            }
            await loop.settle()
            for id in ids {
                let served = await gateway.servedValue(id)
                fuzzProperty(
                    served == expected[id],
                    "\(id): served \(served ?? []) where the config's sources give \(expected[id] ?? [])")
                fuzzProperty(
                    port.value(id) == expected[id],
                    "\(id): the port holds \(port.value(id) ?? []), expected \(expected[id] ?? [])")
            }
            for id in [
                PeripheralCharacteristicID(service: settings.services.count, characteristic: 0),
                PeripheralCharacteristicID(service: 0, characteristic: 9),
            ] where !ids.contains(id) {
                let served = await gateway.servedValue(id)
                fuzzProperty(
                    served == nil && port.value(id) == nil, "a value served for \(id), which the config does not name")
            }
            fuzzProperty(
                port.notified.allSatisfy { ids.contains($0.0) },
                "a notification for a characteristic the config does not name")
            checkAdvertisement(port.advertisements.last ?? nil, settings, manufacturer, serviceData)
        }
        // bridge/health says how many values did not fit.
        clock.advance(by: 61)
        await loop.settle()
        await gateway.tick()
        await loop.settle()
        let health = mqtt.messages(on: "gattway/bridge/health").last.flatMap { try? JSONValue.parse($0.payload) }
        fuzzProperty(
            health?["dropped"]?["peripheral_value"] == .number(Double(errors)),
            "dropped.peripheral_value is \(health?["dropped"]?["peripheral_value"] ?? .null), \(errors) values did not fit"
        )
        jobs.cancel()
        await jobs.value
        await gateway.stop()
        await loop.settle()
    }

    static func checkAdvertisement(
        _ advertisement: PeripheralAdvertisement?, _ settings: PeripheralSettings,
        _ manufacturer: [[UInt8]], _ serviceData: [[UInt8]]
    ) {
        let advertising = settings.advertising
        guard advertising.enabled else {
            fuzzProperty(advertisement == nil, "advertising while the config turns it off")
            return
        }
        guard let advertisement else {
            fuzzProperty(false, "not advertising")
            return
        }
        let data = advertisement.data
        fuzzProperty(data.localName == advertising.localName, "advertised name \(data.localName ?? "none")")
        fuzzProperty(
            data.serviceUUIDs == (advertising.serviceUUIDs ?? settings.services.map(\.uuid)), "advertised services")
        fuzzProperty(advertisement.connectable == advertising.connectable, "connectable")
        fuzzProperty(data.txPower.map(Int.init) == advertising.txPower, "TX power")
        fuzzProperty(
            Set(data.manufacturerData.keys) == Set(advertising.manufacturerData.map(\.companyID)),
            "manufacturer data keys")
        fuzzProperty(Set(data.serviceData.keys) == Set(advertising.serviceData.map(\.uuid)), "service data keys")
        for (index, entry) in advertising.manufacturerData.enumerated() {
            fuzzProperty(
                data.manufacturerData[entry.companyID] == manufacturer[index],
                "manufacturer data \(entry.companyID): \(data.manufacturerData[entry.companyID] ?? []), expected \(manufacturer[index])"
            )
        }
        for (index, entry) in advertising.serviceData.enumerated() {
            fuzzProperty(
                data.serviceData[entry.uuid] == serviceData[index],
                "service data \(entry.uuid): \(data.serviceData[entry.uuid] ?? []), expected \(serviceData[index])")
        }
    }

    /// Payloads the docs and tests send (PeripheralTests, docs/peripheral.md), each on the topic
    /// it was meant for, and central writes of every characteristic.
    static let seeds: [[UInt8]] = {
        let payloads: [(Int, String, String)] = [
            (0, "gattway/thermo/state", #"{"temperature": 21.57, "humidity": 40}"#),
            (0, "gattway/thermo/state", #"{"temperature": -5.5}"#),
            (0, "gattway/thermo/state", #"{"humidity": 40}"#),
            (0, "gattway/thermo/state", "not json"),
            (0, "gattway/thermo/state", #"{"temperature": 400}"#),
            (0, "home/humidity", "55.5"),
            (0, "beacon/data", "40020a0b"),
            (1, "gattway/livingroom/state", #"{"temperature": 22.5, "humidity": 41}"#),
            (2, "multi/state", #"{"t": 21.5, "on": true, "n": 4294967295}"#),
            (2, "multi/state", #"{"t": -1e300, "on": "off", "n": -1}"#),
            (2, "multi/text", "héllo"),
            (2, "multi/raw", "00ff10"),
            (2, "multi/json", #"{"a": [1, null, "x"]}"#),
            (2, "multi/b64", "AAECAw=="),
            (2, "adv/m", "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e"),
            (2, "adv/s", #"{"b": "QAIK"}"#),
        ]
        var seeds: [[UInt8]] = []
        for (config, topic, payload) in payloads {
            var builder = FuzzInputBuilder()
            builder.index(config)
            builder.byte(0)
            let topics = configs[config].peripheral.sourceTopics
            builder.index(topics.firstIndex(of: topic) ?? topics.count)
            if !topics.contains(topic) { builder.string(topic) }
            builder.string(payload)
            // A central writes every characteristic of the first service, and subscribes.
            for index in 0..<3 {
                builder.byte(3)
                builder.byte(0)
                builder.byte(UInt8(index))
                builder.chunk([UInt8(index), 0x7F])
                builder.bool(index == 1)
            }
            builder.byte(4)
            builder.byte(0)
            builder.byte(0)
            builder.bool(true)
            seeds.append(builder.bytes)
        }
        return seeds
    }()
}
