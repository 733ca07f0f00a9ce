import Bluetooth
import Gateway
import GatewayFakes
import JSON
import Synchronization

extension FuzzTargets {
    /// MQTT messages on everything `gattway run` subscribes to (``Gateway/subscriptions(for:)``),
    /// from any client the broker lets publish, interleaved with what the radio side does —
    /// advertisements that register and evict devices, links that drop or come up, notifications
    /// — and with time passing, into a real ``Gateway`` on in-memory ports and a manual clock.
    /// See ``MQTTCommandsFuzz`` for the encoding and the properties.
    static let mqttCommands = FuzzTarget(
        name: "mqtt-commands",
        summary: "MQTT command topics (set, get, bridge requests, HA status) with BLE events into a Gateway",
        seeds: { MQTTCommandsFuzz.seeds },
        run: { MQTTCommandsFuzz.run($0) })
}

/// The driver of ``FuzzTargets/mqttCommands``.
///
/// Encoding: config choice (u16), a byte of fake-device flags (bit n: the n-th pool address fails
/// to connect; bits 4–6 all set: writes never complete, until gatt_timeout; bit 7: subscribed
/// characteristics are read-only), then up to ``maxSteps`` steps,
/// each an op byte and its operands:
/// - 0–4 a message: shape (u16: set, set/<command>, get, bridge/request/<verb>, the HA status
///   topic, any topic), device (u16 into ``Setup/names``, past it a string), command or verb
///   (u16, past the list a string), flags (bit 0 retain, bit 1 a response topic string follows,
///   bit 2 no correlation data, else a correlation chunk follows), payload chunk;
/// - 5 an advertisement: address (u16 into the pool, past it 6 bytes), name choice, RSSI,
///   service-data choice, payload chunk, manufacturer flag;
/// - 6 the link of an address drops; 7 a link comes up (what BlueZ reports for links another
///   client made), with the address's advertisement;
/// - 8 the clock moves on (one of ``advances``); 9 a subscribed characteristic notifies a chunk;
/// - 250–255 the pairing agent asks about an address (u16 into the pool, past it 6 bytes): a
///   method byte (its low bits; bit 2: asked for a pairing of this process; bit 3: the question
///   before this one is withdrawn instead), a passkey (u32).
///
/// Properties: no trap and no hang (the gateway becomes idle once enough time passed); no read
/// or write of a characteristic the config does not name for the device, nor on an address no
/// rule names or matched (``CommandOracle``); a retained command never writes (``checkRetained``);
/// at most one response per command message; every response payload is a JSON object with a
/// `status`; pairing answers and `pair` / `unpair` only as ``CheckedPairing`` allows (nothing for
/// a device no rule names, no answer without a question and a `pair/confirm` after it).
///
/// Each command message is also sent as the web page would (``Gateway/pageSend(_:body:answer:)``,
/// the kind by its position): its payload as the body, with the topic's device level added as
/// `device` when the payload is an object without one. What that sends is held to the same oracle;
/// a page send gets at most one answer, carrying its own transaction.
enum MQTTCommandsFuzz {
    static let maxSteps = 16
    /// Retained `/set` and `gatt/write` messages must not write (fixture
    /// `Tests/Fixtures/fuzz/mqtt-commands/retained-set-brightness-writes`: a retained "10" on
    /// `gattway/lamp/set/brightness` wrote FFF1 and answered ok before the fix).
    static let checkRetained = true
    /// Every command message with a device topic gets exactly one response (not only at most one)
    /// once the gateway is idle.
    nonisolated(unsafe) static var checkExactlyOne = true
    static let advances: [Double] = [0.05, 1, 5, 10, 31, 61, 600]
    static let base = "gattway"

    /// The configs the inputs choose from (parsed once).
    static let configTexts: [String] = [
        // The lamp of Tests/GatewayTests/CommandTests.swift, a connected meter, every encoding,
        // raw GATT by name pattern, an advertisement-only prefix rule; one connection slot.
        """
        {"homeassistant": {"enabled": false}, "health": {"enabled": false}, "store_and_forward": {"enabled": false},
         "commands": {"max_payload_bytes": 64, "ttl": "30s", "queue_limit": 3},
         "bluetooth": {"gatt_timeout": "5s", "connect_timeout": "5s", "max_connections": 1, "max_devices": 4,
                       "forget_after": "60s"},
         "devices": [
          {"match": {"address": "A4:C1:38:00:00:10"}, "name": "lamp",
           "commands": {"brightness": {"characteristic": "FFF1", "encoding": "u8", "maximum": 100},
                        "mode": {"characteristic": "FFF2", "encoding": "u16le", "response": false},
                        "pattern": {"characteristic": "FFF2", "encoding": "hex"}},
           "raw_gatt": true},
          {"match": {"address": "A4:C1:38:00:00:11"}, "name": "meter", "connect": true,
           "subscribe": [{"service": "180F", "characteristic": "2A19"}],
           "poll": [{"characteristic": "2A6E", "interval": "10s"}],
           "commands": {"reset": {"service": "FF00", "characteristic": "FF01", "encoding": "bool"}}},
          {"match": {"address": "A4:C1:38:00:00:12"},
           "commands": {"text": {"characteristic": "FFF3", "encoding": "utf8"},
                        "blob": {"characteristic": "FFF4", "encoding": "base64", "ttl": "2s"},
                        "cfg": {"characteristic": "FFF5", "encoding": "json"},
                        "f": {"characteristic": "FFF6", "encoding": "float32le", "minimum": -10, "maximum": 10},
                        "s": {"characteristic": "FFF7", "encoding": "s32be"}}},
          {"match": {"name": "ATC_*"}, "raw_gatt": true},
          {"match": {"address_prefix": "A4:C1:38"}}
         ]}
        """,
        // The end-to-end demo world (Tests/EndToEndTests/DemoWorldConfig.swift) with Home
        // Assistant, availability, a command rate limit and store-and-forward in memory.
        """
        {"mqtt": {"base_topic": "gattway", "retain": true},
         "homeassistant": {"enabled": true, "state_delay": "1s"}, "health": {"enabled": true, "interval": "30s"},
         "availability": {"enabled": true},
         "bluetooth": {"connect_timeout": "5s", "gatt_timeout": "3s", "max_connections": 2},
         "commands": {"max_payload_bytes": 256, "rate_limit": {"burst": 2, "interval": "1s"}},
         "parsers": {"lamp_state": {"characteristic": "ff02", "fields": [{"name": "light", "offset": 0, "type": "u8"}]}},
         "devices": [
          {"match": {"address": "A4:C1:38:00:00:01"}, "name": "battery_sensor", "connect": true,
           "subscribe": [{"service": "180F", "characteristic": "2A19", "parser": "battery_level"}]},
          {"match": {"address": "A4:C1:38:00:00:02"}, "name": "env_sensor", "connect": true,
           "subscribe": [{"characteristic": "2A6E"}, {"characteristic": "2A6F"}]},
          {"match": {"address": "A4:C1:38:00:00:03"}, "name": "lamp", "connect": true,
           "subscribe": [{"service": "ff00", "characteristic": "ff02", "parser": "lamp_state"}],
           "commands": {"light": {"service": "ff00", "characteristic": "ff01", "encoding": "bool"},
                        "brightness": {"service": "ff00", "characteristic": "ff01", "encoding": "u8", "maximum": 100},
                        "scene": {"service": "ff00", "characteristic": "ff03", "encoding": "u8",
                                  "options": ["0", "1", "2"]},
                        "reboot": {"service": "ff00", "characteristic": "ff04", "encoding": "bool", "press": true}}},
          {"match": {"address": "A4:C1:38:00:00:04"}, "name": "bthome_th"},
          {"match": {"address": "C4:D3:8C:12:4A:5F"}, "name": "ruuvi"},
          {"match": {"services": ["FCD2"]}}
         ]}
        """,
        // Rules by address without names (topics use the address without colons), a list of
        // addresses, raw GATT on a connected device, another base topic.
        """
        {"mqtt": {"base_topic": "gattway"}, "homeassistant": {"enabled": false}, "health": {"enabled": false},
         "commands": {"ttl": "5s", "idle_disconnect": "10s", "queue_limit": 2},
         "bluetooth": {"max_connections": 3, "max_devices": 2, "forget_after": "30s"},
         "devices": [
          {"match": {"address": "11:22:33:44:55:66"}, "raw_gatt": true,
           "commands": {"on": {"characteristic": "0000fff1-0000-1000-8000-00805f9b34fb", "encoding": "bool"}}},
          {"match": {"address": "11:22:33:44:55:67"}, "connect": true, "raw_gatt": true,
           "subscribe": [{"characteristic": "2A19"}]},
          {"match": {"address": ["C4:D3:8C:12:4A:5F", "A4:C1:38:AA:BB:CC"]},
           "commands": {"x": {"service": "1234", "characteristic": "5678", "encoding": "u16be"}}}
         ]}
        """,
        // Device models (named actions) and a hand-written template using every kind of part;
        // Home Assistant on (the actions' buttons).
        """
        {"homeassistant": {"enabled": true}, "health": {"enabled": false}, "store_and_forward": {"enabled": false},
         "commands": {"max_payload_bytes": 128, "ttl": "30s"},
         "bluetooth": {"gatt_timeout": "5s", "connect_timeout": "5s", "max_connections": 2},
         "devices": [
          {"match": {"address": "A4:C1:38:00:00:20"}, "name": "clock", "model": "LYWSD02"},
          {"match": {"address": "A4:C1:38:00:00:21"}, "name": "bot", "model": "SwitchBot Bot"},
          {"match": {"address": "A4:C1:38:00:00:22"}, "name": "curtain", "model": "SwitchBot Curtain",
           "commands": {"tpl": {"characteristic": "FFF8", "response": false, "template": [
             {"hex": "01"}, {"value": "n", "type": "s16le", "minimum": -5, "default": 2},
             {"value": "local_time", "type": "u32be"}, {"value": "tz_offset_minutes", "type": "s16le"},
             {"value": "f", "type": "float32le", "default": 0.5}]}}},
          {"match": {"address": "A4:C1:38:00:00:23"}, "name": "pvvx", "model": "PVVX"}
         ]}
        """,
    ]

    /// A config with what the inputs pick from.
    struct Setup: Sendable {
        let config: GatewayConfig
        /// The addresses fake devices answer at (config addresses and a few others).
        let pool: [BluetoothAddress]
        /// Device names for topics: rule names, default names, addresses as text, odd levels.
        let names: [String]
        /// Command names of every rule, and attribute-ish keys.
        let commands: [String]
        /// What every fake device offers: each characteristic the config names, the same under
        /// another service, and some nobody names.
        let characteristics: [BLECharacteristic]
    }

    static let setups: [Setup] = configTexts.map { text in
        let config: GatewayConfig
        do { config = try GatewayConfig.parse(Array(text.utf8)) } catch { fatalError("mqtt-commands config: \(error)") }
        var pool: [BluetoothAddress] = []
        for rule in config.devices {
            for address in rule.match.addresses where !pool.contains(address) { pool.append(address) }
        }
        for extra in [
            "A4:C1:38:AA:BB:CC", "A4:C1:38:00:00:99", "11:22:33:44:55:66", "C4:D3:8C:12:4A:5F", "DE:AD:BE:EF:00:01",
        ] {
            if let address = BluetoothAddress(extra), !pool.contains(address) { pool.append(address) }
        }
        var names = config.devices.compactMap(\.name)
        for address in pool {
            names.append(String(address.description.filter { $0 != ":" }))
            names.append(address.description)
        }
        names += ["bridge", "", "+", "#", "lamp/extra", "response"]
        var commands: [String] = []
        for rule in config.devices {
            for command in rule.commands where !commands.contains(command.name) { commands.append(command.name) }
        }
        commands += ["transaction", "timestamp", "battery_level", "2A19", "light", ""]
        var characteristics: [BLECharacteristic] = []
        func add(_ service: BluetoothUUID?, _ uuid: BluetoothUUID, _ properties: CharacteristicProperties) {
            for service in [service ?? BluetoothUUID(0xFFF0), BluetoothUUID(0xABCD)] {
                let characteristic = BLECharacteristic(service: service, uuid: uuid, properties: properties)
                if !characteristics.contains(characteristic) { characteristics.append(characteristic) }
            }
        }
        let all: CharacteristicProperties = [.read, .write, .writeWithoutResponse, .notify]
        for rule in config.devices {
            for command in rule.commands { add(command.service, command.characteristic, all) }
            for spec in rule.subscribe + rule.poll { add(spec.service, spec.characteristic, all) }
        }
        add(BluetoothUUID(0x1800), BluetoothUUID(0x2A00), all)
        add(BluetoothUUID(0xFFF0), BluetoothUUID(0xFFFF), all)
        return Setup(config: config, pool: pool, names: names, commands: commands, characteristics: characteristics)
    }

    static let verbs = [
        "gatt/read", "gatt/write", "device/remove", "gatt", "gatt/read/extra", "device/bindkey", "device/pair",
        "device/pair/confirm", "device/unpair",
    ]

    /// One message the input sends, and what became of it.
    /// What a page send (``Gateway/pageSend(_:body:answer:)``) was answered (on the loop).
    final class PageAnswers: @unchecked Sendable {
        var values: [JSONValue] = []
    }

    /// The page's body for a command message: its payload, with `device` from the topic's
    /// second level when the payload is an object without one.
    static func pageBody(_ message: MQTTInboundMessage) -> [UInt8] {
        let levels = message.topic.split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count > 1, case .object(var members)? = try? JSONValue.parse(message.payload),
            !members.contains(where: { $0.key == "device" })
        else { return message.payload }
        members.insert(("device", .string(String(levels[1]))), at: 0)
        var body: [UInt8] = []
        JSONValue.object(members).write(into: &body)
        return body
    }

    struct Sent {
        var tag: [UInt8]?
        var retained: Bool
        /// The message is a command by its topic (it must get a response).
        var command: Bool
        /// A `/set` or `gatt/write`: writes when it succeeds.
        var writes: Bool
        var topic: String
    }

    static func run(_ bytes: [UInt8]) {
        var input = FuzzInput(bytes)
        let setup = setups[input.index(setups.count)]
        let flags = input.byte()
        var steps: [Step] = []
        while !input.isEmpty, steps.count < maxSteps { steps.append(Step.read(&input, setup)) }
        let decoded = steps
        let outcome = LoopDriver.run { await drive(setup, flags: flags, steps: decoded) }
        fuzzProperty(outcome == .finished, "mqtt-commands: the driver never finished (a call into the gateway hangs)")
    }

    /// One step of an input, decoded before anything runs.
    enum Step: Sendable {
        case message(MQTTInboundMessage, command: Bool, writes: Bool)
        case advertise(BluetoothAddress, AdvertisementData)
        case drop(BluetoothAddress)
        case connected(BluetoothAddress, AdvertisementData)
        case advance(Double)
        case notify(BluetoothAddress, BluetoothUUID, [UInt8])
        case ask(BluetoothAddress, PairingMethod, passkey: UInt32, here: Bool, withdraw: Bool)

        static let methods: [PairingMethod] = [
            .passkeyEntry, .numericComparison, .authorization, .passkeyDisplay,
        ]

        static func read(_ input: inout FuzzInput, _ setup: Setup) -> Step {
            let raw = input.byte()
            if raw >= 250 {
                let address = address(&input, setup)
                let flags = input.byte()
                let passkey = input.bytes(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } % 1_000_000
                return .ask(
                    address, methods[Int(flags & 3)], passkey: passkey, here: flags & 4 != 0, withdraw: flags & 8 != 0)
            }
            let op = raw % 10
            switch op {
            case 0...4: return message(&input, setup)
            case 5: return .advertise(address(&input, setup), advertisement(&input, setup))
            case 6: return .drop(address(&input, setup))
            case 7: return .connected(address(&input, setup), advertisement(&input, setup))
            case 8: return .advance(input.pick(MQTTCommandsFuzz.advances))
            default:
                let uuids =
                    setup.config.devices.flatMap { $0.subscribe.map(\.characteristic) } + [BluetoothUUID(0x2A19)]
                return .notify(address(&input, setup), input.pick(uuids), input.chunk(limit: 24))
            }
        }

        static func address(_ input: inout FuzzInput, _ setup: Setup) -> BluetoothAddress {
            let choice = input.index(setup.pool.count + 1)
            if choice < setup.pool.count { return setup.pool[choice] }
            let octets = (input.bytes(6) + [UInt8](repeating: 0, count: 6)).prefix(6)
            return BluetoothAddress(octets: octets) ?? BluetoothAddress(rawValue: 1)
        }

        static func advertisement(_ input: inout FuzzInput, _ setup: Setup) -> AdvertisementData {
            let names: [String?] = [nil, "ATC_1234", "lamp", "ATC_", "x"]
            var advertisement = AdvertisementData(
                localName: input.pick(names), rssi: Int16(Int8(bitPattern: input.byte())))
            // Service data under FCD2 (BTHome v2, a valid reading first), a UUID no parser reads,
            // or none; not BTHome v1 (181C/181E: its timestamp trap is known and fixed elsewhere).
            let payload = input.chunk(limit: 20)
            switch input.byte() % 4 {
            case 0: advertisement.serviceData[BluetoothUUID(0xFCD2)] = [0x40, 0x02, 0xCA, 0x09] + payload
            case 1: advertisement.serviceData[BluetoothUUID(0xFCD2)] = payload
            case 2: advertisement.serviceData[BluetoothUUID(0xFEED)] = payload
            default: break
            }
            let more = input.byte()
            if more & 1 != 0 { advertisement.manufacturerData[0x0499] = payload }
            if more & 2 != 0 { advertisement.serviceUUIDs = [BluetoothUUID(0xFCD2), BluetoothUUID(0x180F)] }
            return advertisement
        }

        static func message(_ input: inout FuzzInput, _ setup: Setup) -> Step {
            let shape = input.index(6)
            let nameChoice = input.index(setup.names.count + 1)
            let name = nameChoice < setup.names.count ? setup.names[nameChoice] : input.string(limit: 16)
            let commandChoice = input.index(max(setup.commands.count, MQTTCommandsFuzz.verbs.count) + 1)
            let flags = input.byte()
            let base = MQTTCommandsFuzz.base
            var command = true
            var writes = false
            let topic: String
            switch shape {
            case 0:
                topic = "\(base)/\(name)/set"
                writes = true
            case 1:
                let level =
                    commandChoice < setup.commands.count ? setup.commands[commandChoice] : input.string(limit: 12)
                topic = "\(base)/\(name)/set/\(level)"
                writes = true
            case 2: topic = "\(base)/\(name)/get"
            case 3:
                let verb =
                    commandChoice < MQTTCommandsFuzz.verbs.count
                    ? MQTTCommandsFuzz.verbs[commandChoice] : input.string(limit: 12)
                topic = "\(base)/bridge/request/\(verb)"
                writes = verb == "gatt/write"
            case 4:
                topic = setup.config.homeAssistant.statusTopic
                command = false
            default:
                topic = input.string(limit: 40)
                command = false
            }
            let responseTopic: String? = flags & 2 != 0 ? input.string(limit: 30) : nil
            let correlation: [UInt8]? = flags & 4 != 0 ? nil : input.chunk(limit: 8)
            let payload = input.chunk()
            // The topic parse the gateway does: the command shapes only when the levels fit.
            command = command && Self.isCommandTopic(topic, base: base)
            return .message(
                MQTTInboundMessage(
                    topic: topic, payload: payload, responseTopic: responseTopic,
                    correlationData: correlation, retain: flags & 1 != 0),
                command: command, writes: writes)
        }

        /// `<base>/<device>/set[/<command>]`, `<base>/<device>/get` or `<base>/bridge/request/<verb>`.
        static func isCommandTopic(_ topic: String, base: String) -> Bool {
            guard topic.hasPrefix(base + "/") else { return false }
            let levels = topic.dropFirst(base.count + 1).split(separator: "/", omittingEmptySubsequences: false)
            if levels.first == "bridge" { return levels.count >= 3 && levels[1] == "request" }
            guard levels.count >= 2 else { return false }
            if levels[1] == "set" { return levels.count <= 3 }
            return levels[1] == "get" && levels.count == 2
        }
    }

    /// Runs the steps on a fresh gateway and checks the properties.
    static func drive(_ setup: Setup, flags: UInt8, steps: [Step]) async {
        let oracle = CommandOracle(config: setup.config)
        let fake = InMemoryBLE()
        for (position, address) in setup.pool.enumerated() {
            let readOnly = flags & 0x80 != 0
            let characteristics = setup.characteristics.map { characteristic in
                var characteristic = characteristic
                if readOnly, characteristic.properties.contains(.notify) { characteristic.properties = [.read] }
                return characteristic
            }
            let fails = position < 7 && flags & (1 << UInt8(position)) != 0
            fake.add(
                address,
                .init(
                    characteristics: characteristics, values: [BluetoothUUID(0x2A19): [42]],
                    connectError: fails ? BLEPortError(.connectionTimeout, "fuzz: no answer") : nil,
                    hangWrites: flags & 0x70 == 0x70))
        }
        let named = Set(setup.config.devices.flatMap(\.match.addresses))
        let pairing = CheckedPairing(named: named)
        let ble = CheckedBLE(fake, pairing: pairing) { oracle.check($0, $1, $2) }
        let mqtt = InMemoryMQTT()
        let clock = ManualClock(wallMilliseconds: 1_796_058_000_000)
        let loop = LoopDriver.loop
        let gateway = Gateway(
            config: setup.config, ble: ble, peripheral: nil, mqtt: mqtt, clock: clock, loop: loop,
            reconnect: { FixedReconnectDelay(delay: 5) }, logger: .none, stateDirectory: nil,
            processSample: { nil })
        let jobs = Task(executorPreference: loop.taskExecutor) { await gateway.run() }
        do { try await gateway.start() } catch {
            fuzzProperty(false, "mqtt-commands: the gateway did not start: \(error)")
        }
        await loop.settle()
        var sent: [Sent] = []
        var pageSends: [(token: Int, answers: PageAnswers)] = []
        for step in steps {
            switch step {
            case .message(var message, let command, let writes):
                // A tag at the end of the correlation data and the response topic names the message.
                let id = UInt16(sent.count)
                let tag: [UInt8]? = message.correlationData.map { $0 + [0xF5, UInt8(id >> 8), UInt8(id & 0xFF)] }
                message.correlationData = tag
                if let topic = message.responseTopic { message.responseTopic = topic + "/r\(id)" }
                sent.append(
                    Sent(tag: tag, retained: message.retain, command: command, writes: writes, topic: message.topic))
                if message.topic == "\(base)/bridge/request/device/pair/confirm" { pairing.confirmSent() }
                await gateway.handle(message)
                if command, !message.retain {
                    let kinds = Gateway.pageSendKinds.sorted()
                    let answers = PageAnswers()
                    let start = await gateway.pageSend(kinds[Int(id) % kinds.count], body: Self.pageBody(message)) {
                        answers.values.append($0)
                    }
                    if case .waiting(let token) = start { pageSends.append((token, answers)) }
                }
            case .advertise(let address, let advertisement):
                oracle.saw(address, advertisement)
                fake.advertise(BLEDiscovery(address: address, advertisement: advertisement))
            case .drop(let address):
                fake.dropLink(address)
            case .connected(let address, let advertisement):
                oracle.saw(address, advertisement)
                await gateway.handle(
                    BLEConnectionEvent.connected(BLEDiscovery(address: address, advertisement: advertisement)))
            case .advance(let seconds):
                clock.advance(by: seconds)
                await loop.settle()
                await gateway.tick()
            case .notify(let address, let uuid, let value):
                fake.notify(address, uuid, value)
            case .ask(let address, let method, let passkey, let here, let withdraw):
                if withdraw, pairing.questionCount > 0 {
                    pairing.withdraw(pairing.questionCount)
                } else {
                    let shown: UInt32? = method == .passkeyEntry || method == .authorization ? nil : passkey
                    pairing.ask(address, method: method, passkey: shown, here: here)
                }
            }
            await loop.settle()
        }
        // Time passes until every command has its answer: nothing may wait for ever.
        let idle = Atomic<Bool>(false)
        // On the loop, so that the flag is set before the loop settles (on the global executor
        // the store after the wait could still be queued there when the check comes).
        let waiter = Task(executorPreference: loop.taskExecutor) {
            await gateway.waitUntilIdle()
            idle.store(true, ordering: .releasing)
        }
        for _ in 0..<8 {
            await loop.settle()
            if idle.load(ordering: .acquiring) { break }
            clock.advance(by: 120)
            await loop.settle()
            await gateway.tick()
        }
        await loop.settle()
        fuzzProperty(
            idle.load(ordering: .acquiring), "mqtt-commands: the gateway is not idle after 16 minutes without input")
        waiter.cancel()
        // The web page's reads (Gateway+Page, Gateway+History) after all that, with every topic and
        // topic level the input carried as a device name or address: no trap, and valid JSON.
        var pageReads: [JSONValue?] = [await gateway.pageDevices, await gateway.pageRadio()]
        for topic in Set(sent.map(\.topic)) {
            for text in [topic, String(topic.split(separator: "/").last ?? "")] {
                pageReads.append(await gateway.history(of: text))
                pageReads.append(await gateway.pageRule(for: text))
            }
        }
        for read in pageReads.compactMap({ $0 }) {
            var bytes: [UInt8] = []
            read.write(into: &bytes)
            fuzzProperty((try? JSONValue.parse(bytes)) != nil, "a page read is not valid JSON: \(read)")
        }
        for (token, answers) in pageSends {
            fuzzProperty(answers.values.count <= 1, "\(answers.values.count) answers to one page send")
            for answer in answers.values {
                fuzzProperty(answer["transaction"] == .string("page-\(token)"), "a page send got another's answer")
            }
        }
        check(mqtt.published, sent, pageSends: pageSends.count, setup: setup)
        jobs.cancel()
        await jobs.value
        await gateway.stop()
        await loop.settle()
    }

    static func check(_ published: [MQTTOutboundMessage], _ sent: [Sent], pageSends: Int = 0, setup: Setup) {
        var responses: [[UInt8]: [JSONValue]] = [:]
        var untagged = 0
        for message in published where isResponseTopic(message.topic) {
            let payload = try? JSONValue.parse(message.payload)
            guard case .object(let members)? = payload,
                case .string(let status)? = members.last(where: { $0.key == "status" })?.value
            else {
                fuzzProperty(
                    false, "response on \(message.topic) is not a JSON object with a status: \(message.payloadText)")
                return
            }
            fuzzProperty(["ok", "error", "timeout", "expired"].contains(status), "response status \(status)")
            if let tag = message.correlationData { responses[tag, default: []].append(payload!) } else { untagged += 1 }
        }
        for message in sent {
            guard let tag = message.tag else { continue }
            let answers = responses[tag] ?? []
            fuzzProperty(answers.count <= 1, "\(answers.count) responses to one message on \(message.topic)")
            if checkExactlyOne, message.command {
                fuzzProperty(answers.count == 1, "no response to the command on \(message.topic)")
            }
            if checkRetained, message.retained, message.writes {
                fuzzProperty(
                    answers.first?["status"] != .string("ok"), "a retained command on \(message.topic) was carried out")
            }
        }
        // A page send's response has no correlation data either.
        let untaggedCommands = sent.filter { $0.tag == nil && $0.command }.count + pageSends
        fuzzProperty(
            untagged <= untaggedCommands,
            "\(untagged) responses without correlation data to \(untaggedCommands) commands")
    }

    /// Where responses go: `<device>/response`, `bridge/response/…` and the fuzzed response
    /// topics (tagged `/r<n>`).
    static func isResponseTopic(_ topic: String) -> Bool {
        if topic.hasPrefix(base + "/bridge/response/") { return true }
        if topic.hasPrefix(base + "/"), topic.hasSuffix("/response") { return true }
        guard let slash = topic.lastIndex(of: "/") else { return false }
        let last = topic[topic.index(after: slash)...]
        return last.hasPrefix("r") && last.count > 1 && last.dropFirst().allSatisfy(\.isNumber)
    }
}

extension MQTTCommandsFuzz {
    /// Real command payloads (Tests/GatewayTests/CommandTests.swift, Tests/EndToEndTests/
    /// CommandTests.swift, docs/config.md, README.md) on the topics they were sent to, one
    /// message per seed and a few with BLE events and time around them.
    static let seeds: [[UInt8]] = {
        // (config, shape, device, command or verb, payload)
        let messages: [(Int, Int, String, String, String)] = [
            (0, 0, "lamp", "", #"{"brightness": 80, "transaction": "t1"}"#),
            (0, 0, "lamp", "", #"{"volume": 1}"#),
            (0, 0, "nobody", "", #"{"brightness": 1, "transaction": 7}"#),
            (0, 1, "lamp", "volume", "1"),
            (0, 0, "lamp", "", #"{"brightness": 101}"#),
            (0, 0, "lamp", "", #"{"brightness": -1}"#),
            (0, 0, "lamp", "", #"{"mode": 70000}"#),
            (0, 0, "lamp", "", #"{"pattern": "0g"}"#),
            (0, 0, "lamp", "", #"{"brightness": 1, "mode": "x"}"#),
            (0, 0, "lamp", "", #"{"brightness": "#),
            (0, 0, "lamp", "", "[1]"),
            (0, 0, "lamp", "", #"{"brightness": 5, "timestamp": 1796057900000}"#),
            (0, 0, "lamp", "", #"{"brightness": 5, "mode": 5, "pattern": "01ff", "timestamp": 1796058000}"#),
            (0, 2, "lamp", "", #"{"colour": ""}"#),
            (0, 1, "lamp", "mode", "513"),
            (0, 1, "lamp", "brightness", "10"),
            (0, 1, "lamp", "pattern", "01ff"),
            (0, 3, "lamp", "gatt/read", #"{"device": "lamp", "characteristic": "2A19", "transaction": "r"}"#),
            (0, 3, "lamp", "gatt/write", #"{"device": "lamp", "characteristic": "FFF1", "value": "0102"}"#),
            (
                0, 3, "lamp", "gatt/write",
                #"{"device": "A4:C1:38:00:00:10", "service": "FFF0", "characteristic": "FFF1", "value": "01", "response": false}"#
            ),
            (0, 3, "lamp", "device/remove", #"{"device": "lamp", "transaction": "x"}"#),
            (0, 3, "lamp", "gatt/read", #"{"device": "meter", "characteristic": "2A19"}"#),
            (0, 3, "lamp", "device/bindkey", #"{"device": "lamp", "key": "231d39c1d7cc1ab1aee224cd096db932"}"#),
            (0, 3, "lamp", "device/bindkey", #"{"device": "A4:C1:38:AA:BB:CC", "key": null, "transaction": 2}"#),
            (0, 2, "meter", "", #"{"battery_level": "", "transaction": "g"}"#),
            (0, 2, "meter", "", #"{"2A6E": ""}"#),
            (0, 0, "meter", "", #"{"reset": true}"#),
            (
                0, 0, "A4C138000012", "",
                #"{"text": "hello", "blob": "AAEC", "cfg": {"a": [1, 2]}, "f": 1.5, "s": -5, "transaction": [1]}"#
            ),
            (1, 0, "lamp", "", #"{"light": "ON", "transaction": "t1"}"#),
            (1, 1, "lamp", "light", "OFF"),
            (1, 1, "lamp", "light", "maybe"),
            (1, 2, "lamp", "", #"{"light": "", "transaction": "g1"}"#),
            (1, 0, "lamp", "", #"{"brightness": 40}"#),
            (1, 0, "no_such_lamp", "", #"{"light": "ON", "transaction": "b1"}"#),
            (1, 0, "lamp", "", #"{"fly": 1, "transaction": "b2"}"#),
            (1, 0, "lamp", "", #"{"brightness": 256, "transaction": "b3"}"#),
            (1, 0, "lamp", "", #"{"light": "ON", "brightness": -1, "transaction": "b5"}"#),
            (1, 1, "lamp", "scene", "2"),
            (1, 1, "lamp", "reboot", "true"),
            (1, 4, "", "", "online"),
            (1, 4, "", "", "offline"),
            (1, 3, "lamp", "device/remove", #"{"device": "battery_sensor"}"#),
            (1, 3, "lamp", "device/bindkey", #"{"device": "bthome_th", "key": "231d39c1d7cc1ab1aee224cd096db9"}"#),
            (2, 3, "", "device/bindkey", #"{"device": "11:22:33:44:55:66", "key": ""}"#),
            (2, 0, "112233445566", "", #"{"on": true}"#),
            (
                2, 3, "", "gatt/write",
                #"{"device": "11:22:33:44:55:67", "characteristic": "2A19", "value": "ff", "transaction": 1}"#
            ),
            (2, 0, "C4D38C124A5F", "", #"{"x": 65535}"#),
            (0, 3, "", "device/pair", #"{"device": "lamp", "transaction": "p"}"#),
            (0, 3, "", "device/pair", #"{"device": "A4:C1:38:AA:BB:CC", "transaction": "p"}"#),
            (0, 3, "", "device/unpair", #"{"device": "A4C138000011"}"#),
            (0, 3, "", "device/pair/confirm", #"{"device": "lamp", "passkey": 123456, "transaction": "c"}"#),
            (2, 3, "", "device/pair/confirm", #"{"device": "11:22:33:44:55:66", "accept": true}"#),
            (3, 1, "clock", "set_time", "{}"),
            (3, 1, "clock", "set_time", #"{"timestamp": 1673113293, "tz_offset": -3}"#),
            (3, 0, "clock", "", #"{"set_time": {"tz_offset": 5.5}, "transaction": "c"}"#),
            (3, 1, "bot", "press", ""),
            (3, 0, "curtain", "", #"{"position": {"position": 101}, "tpl": {"n": -5, "f": 1e30}}"#),
            (3, 1, "curtain", "tpl", #"{"timestamp": 4294967295, "tz_offset": 14}"#),
            (3, 1, "pvvx", "set_time", #"{"tz_offset": 5.75, "timestamp": 0}"#),
        ]
        var seeds: [[UInt8]] = []
        for (position, (config, shape, device, choice, payload)) in messages.enumerated() {
            let setup = setups[config]
            var builder = FuzzInputBuilder()
            builder.index(config)
            builder.byte(position % 5 == 4 ? 0x01 : 0)  // now and then the first pool device fails to connect
            // An advertisement from the device first (registers advertisement-matched devices).
            if position % 3 == 0 {
                builder.byte(5)
                builder.index(
                    max(
                        0,
                        setup.pool.firstIndex { setup.names.contains(String($0.description.filter { $0 != ":" })) } ?? 0
                    ))
                builder.index(1)
                builder.byte(0xC4)
                builder.chunk([0x03, 0xBF, 0x13])
                builder.byte(0)
                builder.byte(3)
            }
            builder.byte(0)
            builder.index(shape)
            builder.index(setup.names.firstIndex(of: device) ?? setup.names.count)
            if setup.names.firstIndex(of: device) == nil { builder.string(device) }
            let choices = shape == 3 ? verbs : setup.commands
            builder.index(choices.firstIndex(of: choice) ?? 0)
            // Every fourth message with an MQTT 5 response topic, every seventh retained.
            let flags: UInt8 = (position % 4 == 1 ? 2 : 0) | (position % 7 == 3 ? 1 : 0)
            builder.byte(flags)
            if flags & 2 != 0 { builder.string("client/replies") }
            builder.chunk(position % 2 == 0 ? [1, 2, 3] : [])
            builder.string(payload)
            // Then time passes and the link drops.
            if position % 4 == 2 {
                builder.byte(8)
                builder.index(4)
                builder.byte(6)
                builder.index(0)
            }
            seeds.append(builder.bytes)
        }
        // Writes that never complete (answered timeout after gatt_timeout), with a second
        // command queued behind the first.
        var hanging = FuzzInputBuilder()
        hanging.index(0)
        hanging.byte(0x70)
        for payload in [#"{"brightness": 80, "transaction": "h1"}"#, #"{"mode": 2, "transaction": "h2"}"#] {
            hanging.byte(0)
            hanging.index(0)
            hanging.index(setups[0].names.firstIndex(of: "lamp") ?? 0)
            hanging.index(0)
            hanging.byte(0)
            hanging.chunk([9])
            hanging.string(payload)
        }
        seeds.append(hanging.bytes)
        // The agent asks about the lamp (a passkey entry, for a pairing of the process), about an
        // address no rule names (a comparison), then answers: a passkey out of range, the wrong
        // kind, the right one, one for the stranger, one more for the lamp (none waiting now).
        let names = setups[0].names
        let pool = setups[0].pool
        var pairing = FuzzInputBuilder()
        pairing.index(0)
        pairing.byte(0)
        for (address, flags) in [("A4:C1:38:00:00:10", UInt8(4)), ("DE:AD:BE:EF:00:01", UInt8(1))] {
            pairing.byte(250)
            pairing.index(pool.firstIndex { $0.description == address } ?? 0)
            pairing.byte(flags)
            for byte: UInt8 in [0, 1, 0xE2, 0x40] { pairing.byte(byte) }
        }
        for payload in [
            #"{"device": "lamp", "passkey": 1000000}"#, #"{"device": "lamp", "accept": true}"#,
            #"{"device": "lamp", "passkey": 123456}"#, #"{"device": "DE:AD:BE:EF:00:01", "accept": true}"#,
            #"{"device": "lamp", "passkey": 1}"#,
        ] {
            pairing.byte(0)
            pairing.index(3)
            pairing.index(names.firstIndex(of: "lamp") ?? 0)
            pairing.index(verbs.firstIndex(of: "device/pair/confirm") ?? 0)
            pairing.byte(0)
            pairing.chunk([7])
            pairing.string(payload)
        }
        seeds.append(pairing.bytes)
        return seeds
    }()
}
