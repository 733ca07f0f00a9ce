import Bluetooth
import JSON
import LocalSystem
import Parsers

/// Builds Home Assistant MQTT discovery configs (docs/operations.md, "Home Assistant") — pure, from what the gateway
/// knows about the bridge and a device.
///
/// What Home Assistant needs, and how it is met:
/// - every entity has `unique_id` and a `device` block (entity registry); device entities name
///   the bridge in `via_device`, so the bridge's own configs are published first;
/// - node and object ids use only `[A-Za-z0-9_-]` (HA ignores ids with colons, e.g. a raw MAC);
/// - entity names are short ("Temperature"), never repeating the device name;
/// - availability is a list — `bridge/state` and the device's `availability` — with mode `all`;
/// - states are read from the JSON state with `value_template` (`{{ value_json.temperature }}`).
struct HomeAssistantDiscovery: Sendable {
    let settings: HomeAssistantSettings
    let base: String
    let version: String
    let availabilityEnabled: Bool
    /// The gateway's own topics (`<base>/bridge`, or `<base>/bridge/<gateway_id>` in a fleet).
    var bridge: String
    /// The gateway's name in a fleet (nil: not in one). Each gateway of a fleet is a bridge
    /// device of its own, and a device's entities do not depend on one gateway's state: whichever
    /// gateway owns the device keeps its `availability` (docs/fleet.md).
    var fleetGateway: String?

    init(
        settings: HomeAssistantSettings, base: String, version: String, availabilityEnabled: Bool,
        bridge: String? = nil, fleetGateway: String? = nil
    ) {
        self.settings = settings
        self.base = base
        self.version = version
        self.availabilityEnabled = availabilityEnabled
        self.bridge = bridge ?? base + "/bridge"
        self.fleetGateway = fleetGateway
    }

    /// What a device contributes to discovery.
    struct Device {
        var address: BluetoothAddress
        /// The topic level (friendly name or address without colons).
        var name: String
        var localName: String?
        var format: String?
        /// The attributes, each as its last reading (name, value, unit and device class).
        var attributes: [Reading]
        var commands: [CommandSpec]
        var hasRSSI: Bool
    }

    /// The bridge's node id, also its device identifier.
    var bridgeNode: String { Self.sanitized(base) + "_bridge" + (fleetGateway.map { "_" + Self.sanitized($0) } ?? "") }

    /// The node id (and device identifier) of a device: stable across renames.
    func node(_ address: BluetoothAddress) -> String { Self.sanitized(base) + "_" + DeviceRecord.defaultName(address) }

    private var origin: JSONValue {
        .object([("name", .string("gattway")), ("sw", .string(version))])
    }

    private var bridgeAvailability: JSONValue {
        .object([("topic", .string(bridge + "/state")), ("value_template", .string("{{ value_json.state }}"))])
    }

    private func topic(_ component: String, _ node: String, _ object: String) -> String {
        "\(settings.discoveryPrefix)/\(component)/\(node)/\(object)/config"
    }

    // MARK: Bridge

    /// The bridge's own device and its entities: connection state and store-and-forward depth.
    func bridgeConfigs() -> [DiscoveryConfig] {
        let node = bridgeNode
        let device: JSONValue = .object([
            ("identifiers", .array([.string(node)])),
            (
                "name",
                .string(
                    (base == "gattway" ? "gattway bridge" : "gattway bridge \(base)")
                        + (fleetGateway.map { " " + $0 } ?? ""))
            ),
            ("manufacturer", .string("gattway")),
            ("model", .string("Bluetooth LE to MQTT gateway")),
            ("sw_version", .string(version)),
        ])
        let connection: JSONValue = .object([
            ("name", .string("Connection state")),
            ("unique_id", .string(node + "_connection_state")),
            ("state_topic", .string(bridge + "/state")),
            ("value_template", .string("{{ value_json.state }}")),
            ("payload_on", .string("online")),
            ("payload_off", .string("offline")),
            ("device_class", .string("connectivity")),
            ("entity_category", .string("diagnostic")),
            ("device", device),
            ("origin", origin),
        ])
        let queued: JSONValue = .object([
            ("name", .string("Queued messages")),
            ("unique_id", .string(node + "_queued")),
            ("state_topic", .string(bridge + "/health")),
            ("value_template", .string("{{ value_json.queue.depth }}")),
            ("state_class", .string("measurement")),
            ("entity_category", .string("diagnostic")),
            ("availability", .array([bridgeAvailability])),
            ("device", device),
            ("origin", origin),
        ])
        return [
            DiscoveryConfig(
                component: "binary_sensor", topic: topic("binary_sensor", node, "connection_state"), payload: connection
            ),
            DiscoveryConfig(component: "sensor", topic: topic("sensor", node, "queued"), payload: queued),
        ]
    }

    // MARK: Devices

    /// Every config of a device: one entity per attribute (sensor or binary sensor), RSSI and
    /// last seen as diagnostics, one entity per command (switch, number, button, select, text).
    func deviceConfigs(_ device: Device) -> [DiscoveryConfig] {
        let node = node(device.address)
        let stateTopic = base + "/" + device.name
        var block: [(key: String, value: JSONValue)] = [
            ("identifiers", .array([.string(node)])),
            ("connections", .array([.array([.string("bluetooth"), .string(device.address.description)])])),
            (
                "name",
                .string(
                    device.name == DeviceRecord.defaultName(device.address)
                        ? (device.localName ?? device.name) : device.name)
            ),
            ("via_device", .string(bridgeNode)),
        ]
        if let format = device.format { block.append(("model", .string(format))) }
        let deviceBlock = JSONValue.object(block)
        var availability = fleetGateway == nil ? [bridgeAvailability] : []
        if availabilityEnabled {
            availability.append(
                .object([
                    ("topic", .string(stateTopic + "/availability")),
                    ("value_template", .string("{{ value_json.state }}")),
                ]))
        }
        func entity(_ component: String, _ object: String, _ name: String, _ members: [(key: String, value: JSONValue)])
            -> DiscoveryConfig
        {
            let objectID = Self.sanitized(object)
            var payload: [(key: String, value: JSONValue)] = [
                ("name", .string(name)),
                ("unique_id", .string("\(node)_\(component)_\(objectID)")),
            ]
            payload += members
            if !availability.isEmpty {
                payload += [("availability", .array(availability)), ("availability_mode", .string("all"))]
            }
            payload += [
                ("device", deviceBlock),
                ("origin", origin),
            ]
            return DiscoveryConfig(
                component: component, topic: topic(component, node, objectID), payload: .object(payload))
        }
        var configs: [DiscoveryConfig] = []
        for attribute in device.attributes {
            let template = "{{ value_json\(Self.jsonPath(attribute.name)) }}"
            switch attribute.value {
            case .bool:
                var members: [(key: String, value: JSONValue)] = [
                    ("state_topic", .string(stateTopic)),
                    ("value_template", .string("{{ 'ON' if value_json\(Self.jsonPath(attribute.name)) else 'OFF' }}")),
                ]
                if let deviceClass = attribute.deviceClass {
                    members.append(("device_class", .string(deviceClass.rawValue)))
                }
                configs.append(entity("binary_sensor", attribute.name, Self.title(attribute.name), members))
            case .number, .null:
                var members: [(key: String, value: JSONValue)] = [
                    ("state_topic", .string(stateTopic)),
                    ("value_template", .string(template)),
                ]
                if let unit = attribute.unit { members.append(("unit_of_measurement", .string(unit))) }
                if let deviceClass = attribute.deviceClass {
                    members.append(("device_class", .string(deviceClass.rawValue)))
                }
                if attribute.deviceClass != .timestamp { members.append(("state_class", .string("measurement"))) }
                configs.append(entity("sensor", attribute.name, Self.title(attribute.name), members))
            case .string:
                configs.append(
                    entity(
                        "sensor", attribute.name, Self.title(attribute.name),
                        [("state_topic", .string(stateTopic)), ("value_template", .string(template))]))
            case .numbers:
                continue
            }
        }
        if device.hasRSSI {
            configs.append(
                entity(
                    "sensor", "rssi", "RSSI",
                    [
                        ("state_topic", .string(stateTopic)), ("value_template", .string("{{ value_json.rssi }}")),
                        ("unit_of_measurement", .string("dBm")), ("device_class", .string("signal_strength")),
                        ("state_class", .string("measurement")), ("entity_category", .string("diagnostic")),
                        ("enabled_by_default", .bool(false)),
                    ]))
            configs.append(
                entity(
                    "sensor", "last_seen", "Last seen",
                    [
                        ("state_topic", .string(stateTopic)), ("value_template", .string("{{ value_json.last_seen }}")),
                        ("device_class", .string("timestamp")), ("entity_category", .string("diagnostic")),
                        ("enabled_by_default", .bool(false)),
                    ]))
        }
        for command in device.commands {
            if let config = commandConfig(command, device: device, stateTopic: stateTopic, entity: entity) {
                configs.append(config)
            }
        }
        return configs
    }

    /// The entity of a command: `press` → button, `options` → select, `bool` → switch, numeric
    /// encodings → number, `utf8` → text; other encodings (hex, base64, json) get none.
    private func commandConfig(
        _ command: CommandSpec, device: Device, stateTopic: String,
        entity: (String, String, String, [(key: String, value: JSONValue)]) -> DiscoveryConfig
    ) -> DiscoveryConfig? {
        let commandTopic: (key: String, value: JSONValue) = (
            "command_topic", .string(stateTopic + "/set/" + command.name)
        )
        let state = device.attributes.first { $0.name == command.name }
        let path = Self.jsonPath(command.name)
        var stateMembers: [(key: String, value: JSONValue)] {
            guard state != nil else { return [] }
            return [("state_topic", .string(stateTopic)), ("value_template", .string("{{ value_json\(path) }}"))]
        }
        let name = Self.title(command.name)
        if let press = command.press {
            let text: String = if case .string(let string) = press { string } else { press.serialized }
            return entity("button", command.name, name, [commandTopic, ("payload_press", .string(text))])
        }
        if let options = command.options {
            return entity(
                "select", command.name, name,
                [commandTopic, ("options", .array(options.map { .string($0) }))] + stateMembers)
        }
        if command.encoding == .bool {
            var members: [(key: String, value: JSONValue)] = [
                commandTopic, ("payload_on", .string("ON")), ("payload_off", .string("OFF")),
            ]
            if state != nil {
                members += [
                    ("state_topic", .string(stateTopic)),
                    ("value_template", .string("{{ 'ON' if value_json\(path) else 'OFF' }}")),
                ]
            }
            return entity("switch", command.name, name, members)
        }
        if command.encoding.isNumeric {
            let range = command.encoding.numericRange
            let minimum = command.minimum ?? range.lowerBound
            let maximum = command.maximum ?? range.upperBound
            return entity(
                "number", command.name, name,
                [
                    commandTopic, ("min", .number(minimum)), ("max", .number(maximum)),
                    ("step", .number(command.encoding == .float32le ? 0.1 : 1)),
                ] + stateMembers)
        }
        if command.encoding == .utf8 {
            return entity("text", command.name, name, [commandTopic] + stateMembers)
        }
        return nil
    }

    /// An id HA accepts: `[A-Za-z0-9_-]`, everything else becomes `_`.
    static func sanitized(_ text: String) -> String {
        String(
            text.unicodeScalars.map { scalar -> Character in
                switch scalar.value {
                case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x5F: Character(scalar)
                default: "_"
                }
            })
    }

    /// `.temperature`, or `['odd key']` for names that are not identifiers.
    static func jsonPath(_ name: String) -> String {
        let identifier =
            !name.isEmpty
            && name.unicodeScalars.allSatisfy {
                ($0.properties.isAlphabetic && $0.isASCII) || $0 == "_" || ("0"..."9").contains($0)
            }
            && !("0"..."9").contains(name.unicodeScalars.first ?? "0")
        return identifier ? "." + name : "['" + name.replacing("'", with: "\\'") + "']"
    }

    /// A short entity name: `humidity_2` → `Humidity 2`.
    static func title(_ name: String) -> String {
        let words = name.split(whereSeparator: { $0 == "_" || $0 == "-" })
        guard let first = words.first else { return name }
        return ([first.prefix(1).uppercased() + first.dropFirst()] + words.dropFirst().map(String.init)).joined(
            separator: " ")
    }
}

extension ValueEncoding {
    /// The values the encoding can carry (for HA `number` min/max).
    var numericRange: ClosedRange<Double> {
        guard let layout = integerLayout else { return -1_000_000...1_000_000 }
        let bits = layout.size * 8
        return layout.signed ? -pow2d(bits - 1)...(pow2d(bits - 1) - 1) : 0...(pow2d(bits) - 1)
    }
}

private func pow2d(_ exponent: Int) -> Double { Double(sign: .plus, exponent: exponent, significand: 1) }
