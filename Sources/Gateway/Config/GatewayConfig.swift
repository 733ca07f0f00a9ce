import Bluetooth
import JSON
import LocalSystem
import Parsers

/// The validated contents of config.json (every key is in docs/config.md).
///
/// ``parse(_:)`` reads the whole file and reports every problem at once, each naming its JSON
/// path and what was expected; the CLI prints one line per problem and exits 78.
public struct GatewayConfig: Sendable {
    public var mqtt = MQTTSettings()
    public var bluetooth = BluetoothSettings()
    public var availability = AvailabilitySettings()
    public var commands = CommandSettings()
    public var homeAssistant = HomeAssistantSettings()
    public var storeAndForward = StoreAndForwardSettings()
    public var health = HealthSettings()
    /// `bluetooth_proxy`: the ESPHome native API server (Home Assistant Bluetooth proxy).
    public var bluetoothProxy = BluetoothProxySettings()
    /// `fleet`: one owner per device among the gateways of one base topic (docs/fleet.md).
    public var fleet = FleetSettings()
    /// `web`: the web server (`/metrics`, the JSON API; docs/web.md).
    public var web = WebSettings()
    /// `presence`: people and trackers by IRK, address or beacon (docs/config.md); nil when
    /// config.json has no such section (then nothing of presence is built).
    public var presence: PresenceSettings?

    /// This gateway's name in a fleet: `fleet.gateway_id`, else `mqtt.client_id`.
    public var gatewayID: String { fleet.gatewayID ?? mqtt.clientID }

    /// Where this gateway's own topics are (`bridge/state`, `bridge/health`, requests and their
    /// responses, …): `<base>/bridge`, or `<base>/bridge/<gateway_id>` in a fleet, where several
    /// gateways share the base topic.
    public var bridgeTopic: String { mqtt.baseTopic + "/bridge" + (fleet.enabled ? "/" + gatewayID : "") }
    /// `role`: central (default), peripheral or both.
    public var role = GatewayRole.central
    /// `peripheral`: the GATT server and advertising of the peripheral role.
    public var peripheral = PeripheralSettings()
    /// `state_directory`: where the store-and-forward queue file lives; nil: the queue is kept
    /// in memory only (``Gateway`` may be given a directory, e.g. from `--state-dir`).
    public var stateDirectory: String?
    /// Declarative parsers from `parsers`, already registered in ``registry``.
    public var parsers: [DeclarativeParser] = []
    /// The rules of `devices`, in file order.
    public var devices: [DeviceRule] = []
    /// The process's parsers (``ParserRegistry/active``: the built-ins, plus Swift parsers a
    /// package registered through GattwayKit) plus the declarative ones.
    public var registry: ParserRegistry = .active

    /// A configuration with every default and no device rules.
    public init() {}

    /// Reads config.json text.
    public static func parse<C: Collection>(_ bytes: C) throws(GatewayConfigError) -> GatewayConfig
    where C.Element == UInt8 {
        let root: JSONReader
        do {
            root = try JSONReader.parse(bytes)
        } catch {
            throw GatewayConfigError(problems: [error as? JSONPathError ?? JSONPathError(path: "", message: "\(error)")]
            )
        }
        let problems = ConfigProblems()
        var config = GatewayConfig()
        guard var object = ConfigObject(root, problems) else { throw GatewayConfigError(problems: problems.errors) }
        /// The settings of the section `key` when config.json has one (an object), read by `make`.
        func section<T>(_ key: String, _ make: (inout ConfigObject) -> T) -> T? {
            guard let value = object.value(key), var section = ConfigObject(value, problems) else { return nil }
            return make(&section)
        }
        if let mqtt = section("mqtt", MQTTSettings.init) { config.mqtt = mqtt }
        if let bluetooth = section("bluetooth", BluetoothSettings.init) { config.bluetooth = bluetooth }
        if let availability = section("availability", AvailabilitySettings.init) { config.availability = availability }
        if let commands = section("commands", CommandSettings.init) { config.commands = commands }
        if let homeAssistant = section("homeassistant", HomeAssistantSettings.init) {
            config.homeAssistant = homeAssistant
        }
        if let storeAndForward = section("store_and_forward", StoreAndForwardSettings.init) {
            config.storeAndForward = storeAndForward
        }
        if let health = section("health", HealthSettings.init) { config.health = health }
        if let proxy = section("bluetooth_proxy", BluetoothProxySettings.init) { config.bluetoothProxy = proxy }
        if let fleet = section("fleet", FleetSettings.init) { config.fleet = fleet }
        if let web = section("web", WebSettings.init) { config.web = web }
        config.presence = section("presence", PresenceSettings.init)
        config.role = object.read("role", default: .central) { reader in
            let text = try reader.string()
            guard let role = GatewayRole(rawValue: text) else {
                throw reader.fail("\"\(text)\" is not a role (expected central, peripheral or both)")
            }
            return role
        }
        let hasPeripheral =
            object.value("peripheral").map { value in
                if var section = ConfigObject(value, problems) { config.peripheral = PeripheralSettings(&section) }
                return true
            } ?? false
        config.stateDirectory = object.optional("state_directory") { try $0.nonEmptyString() }
        if let value = object.value("parsers") {
            config.parsers = declarativeParsers(value, problems)
            for parser in config.parsers {
                config.registry.register(parser as any CharacteristicParser)
                if !parser.keys.isEmpty { config.registry.register(parser as any AdvertisementParser) }
            }
        }
        if let value = object.value("devices"), let items = problems.attempt({ try value.array() }) {
            let registry = config.registry
            config.devices = items.compactMap { DeviceRule($0, registry: registry, problems: problems) }
        }
        object.finish()
        config.checkNames(problems)
        config.checkRole(problems, hasPeripheral: hasPeripheral)
        config.presence?.check(adapters: config.bluetooth.adapters, problems)
        config.checkPreferences(problems)
        guard problems.errors.isEmpty else { throw GatewayConfigError(problems: problems.errors) }
        return config
    }

    /// Reads the file at `path`.
    public static func load(path: String) throws(GatewayConfigError) -> GatewayConfig {
        guard let data = LocalFile.read(path) else {
            throw GatewayConfigError(problems: [JSONPathError(path: "", message: "cannot read \(path)")])
        }
        return try parse(data)
    }

    private func checkNames(_ problems: ConfigProblems) {
        var seen: [String: Int] = [:]
        for (index, rule) in devices.enumerated() {
            guard let name = rule.name else { continue }
            if let first = seen[name] {
                problems.add("devices[\(index)].name", "\"\(name)\" is already the name of devices[\(first)]")
            } else {
                seen[name] = index
            }
        }
    }

    /// `prefer_gateway` needs a fleet to prefer a gateway of; `prefer_adapter` names one of
    /// `bluetooth.adapters` (as written there).
    private func checkPreferences(_ problems: ConfigProblems) {
        for (index, rule) in devices.enumerated() {
            if let gateway = rule.preferGateway, !fleet.enabled {
                problems.add(
                    "devices[\(index)].prefer_gateway",
                    "\"\(gateway)\" needs fleet.enabled (without a fleet this gateway is the only one)")
            }
            if let adapter = rule.preferAdapter, !bluetooth.adapters.contains(adapter) {
                problems.add(
                    "devices[\(index)].prefer_adapter",
                    "\"\(adapter)\" is not one of bluetooth.adapters (\(bluetooth.adapters.joined(separator: ", ")))")
            }
        }
    }

    /// The `peripheral` section and `role` must agree, so a half-edited file does not silently
    /// serve nothing or scan for nothing.
    private func checkRole(_ problems: ConfigProblems, hasPeripheral: Bool) {
        if role.includesPeripheral, peripheral.services.isEmpty, !peripheral.advertising.enabled {
            problems.add("peripheral", "role \(role.rawValue) needs services or advertising to serve")
        }
        if role == .central, hasPeripheral {
            problems.add("peripheral", "is set but role is central (set \"role\": \"peripheral\" or \"both\")")
        }
        if role == .peripheral, !devices.isEmpty {
            problems.add(
                "devices", "role peripheral does not scan or connect (set \"role\": \"both\" to keep the device rules)")
        }
    }

    /// Declarative parsers with every problem reported: unknown keys are checked here (the
    /// Parsers API reads `Any` and stops at its first error), then each parser is built.
    private static func declarativeParsers(_ reader: JSONReader, _ problems: ConfigProblems) -> [DeclarativeParser] {
        guard let object = ConfigObject(reader, problems) else { return [] }
        var parsers: [DeclarativeParser] = []
        for (name, value) in object.reader.entries() {
            if case .object(let members) = value.value {
                let expected = ["match", "characteristic", "fields"]
                for member in members where !expected.contains(member.key) {
                    problems.add(
                        "\(value.path).\(member.key)",
                        "is not a known key (expected one of \(expected.joined(separator: ", ")))")
                }
                if case .array(let fields)? = value.value["fields"] {
                    let fieldKeys = [
                        "name", "offset", "type", "length", "scale", "value_offset", "unit", "device_class",
                    ]
                    for (index, field) in fields.enumerated() {
                        guard case .object(let fieldMembers) = field else { continue }
                        for member in fieldMembers where !fieldKeys.contains(member.key) {
                            problems.add(
                                "\(value.path).fields[\(index)].\(member.key)",
                                "is not a known key (expected one of \(fieldKeys.joined(separator: ", ")))")
                        }
                    }
                }
            }
            do {
                parsers.append(try DeclarativeParser(name: name, json: value.value, path: value.path))
            } catch {
                problems.add(error.path, error.message)
            }
        }
        return parsers
    }
}
