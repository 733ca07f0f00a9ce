import Bluetooth
import JSON
import Parsers

/// One entry of `devices` in config.json: which devices it applies to (``match``) and what the
/// gateway does with them. The first rule whose match holds decides.
public struct DeviceRule: Sendable {
    public var match: DeviceMatch
    /// The friendly name (topic level); needs a match on exactly one address.
    public var name: String?
    /// Keep a connection to the device (subscribe, poll); false: advertisements only, connected
    /// on demand for commands.
    public var connect: Bool
    public var subscribe: [CharacteristicSpec]
    public var poll: [CharacteristicSpec]
    /// Decode advertisements of the device.
    public var advertisements: Bool
    /// Publish every retransmission of an advertised frame; false (the default): a frame whose
    /// identity (its counter, else its bytes) is the one taken last is dropped as a repeat.
    public var publishRepeats: Bool
    /// 16-byte key for encrypted advertisement formats.
    public var bindKey: [UInt8]?
    /// `model`: a built-in model whose named actions (``DeviceModels``) come first in ``commands``.
    public var model: String?
    /// Commands: the model's, then the rule's own in file order.
    public var commands: [CommandSpec]
    /// Allow raw `bridge/request/gatt/read|write` to this device.
    public var rawGATT: Bool
    public var rateControl: RateControlSettings
    /// Overrides of `mqtt.retain`, `mqtt.qos`, `mqtt.attribute_topics`.
    public var retain: Bool?
    public var qos: Int?
    public var attributeTopics: Bool?
    /// A fixed availability timeout for advertisement-only devices (disables learning).
    public var availabilityTimeout: Double?
    /// The connection parameters the gateway's own links to the device ask for
    /// (`connection_params`), loaded into the kernel before each connect.
    public var connectionParameters: ConnectionParameters?
    /// `prefer_gateway`: in a fleet, the gateway that owns the device while it hears it at or
    /// above ``preferFloorDBm`` (docs/fleet.md, "A preferred gateway").
    public var preferGateway: String?
    /// `prefer_adapter`: with several adapters, the one a link to the device goes through while
    /// it hears the device at or above ``preferFloorDBm`` (docs/config.md, "Several adapters").
    public var preferAdapter: String?
    /// `prefer_floor_dbm`: the weakest RSSI at which the preferred gateway or adapter still counts
    /// as hearing the device.
    public var preferFloorDBm = -90

    init?(_ reader: JSONReader, registry: ParserRegistry, problems: ConfigProblems) {
        guard var object = ConfigObject(reader, problems) else { return nil }
        if let value = object.value("match"), var matchObject = ConfigObject(value, problems) {
            match = DeviceMatch(&matchObject)
        } else {
            match = DeviceMatch()
        }
        name = object.optional("name") { reader in
            let text = try reader.nonEmptyString()
            guard !text.contains("/"), !text.contains("+"), !text.contains("#"), text != "bridge" else {
                throw reader.fail(
                    "\"\(text)\" is not a device name (expected one topic level: no /, + or #, and not \"bridge\")")
            }
            return text
        }
        connect = object.read("connect", default: false) { try $0.bool() }
        let wantsLink = object.reader.members.contains {
            ($0.key == "subscribe" || $0.key == "poll") && $0.value != .array([])
        }
        subscribe = object.read("subscribe", default: []) { reader in
            try reader.array().compactMap {
                CharacteristicSpec($0, poll: false, registry: registry, problems: problems)
            }
        }
        poll = object.read("poll", default: []) { reader in
            try reader.array().compactMap { CharacteristicSpec($0, poll: true, registry: registry, problems: problems) }
        }
        advertisements = object.read("advertisements", default: true) { try $0.bool() }
        publishRepeats = object.read("publish_repeats", default: false) { try $0.bool() }
        bindKey = object.optional("bindkey") { reader in
            let text = try reader.string()
            guard let bytes = Hex.decode(text), bytes.count == 16 else {
                throw reader.fail("expected 32 hex digits (a 16-byte key), got \"\(text)\"")
            }
            return bytes
        }
        model = object.optional("model") { reader in
            let text = try reader.nonEmptyString()
            guard DeviceModels.commands(text) != nil else {
                throw reader.fail(
                    "\"\(text)\" is not a known model (expected one of \(DeviceModels.names.joined(separator: ", ")))")
            }
            return text
        }
        commands = model.flatMap(DeviceModels.commands) ?? []
        if let value = object.value("commands"), let commandsObject = ConfigObject(value, problems) {
            for (key, item) in commandsObject.reader.entries() {
                guard let command = CommandSpec(name: key, item, problems: problems) else { continue }
                if let model, commands.contains(where: { $0.name == key }) {
                    problems.add(
                        commandsObject.path.isEmpty ? key : "\(commandsObject.path).\(key)",
                        "model \(model) already has a command \(key) (rename this one or leave out model)")
                    continue
                }
                commands.append(command)
            }
        }
        rawGATT = object.read("raw_gatt", default: false) { try $0.bool() }
        rateControl = RateControlSettings(&object)
        retain = object.optional("retain") { try $0.bool() }
        qos = object.optional("qos") { try $0.qos() }
        attributeTopics = object.optional("attribute_topics") { try $0.bool() }
        availabilityTimeout = object.optional("availability_timeout") { try $0.positiveDuration() }
        connectionParameters = object.value("connection_params").flatMap {
            Self.connectionParameters($0, problems: problems)
        }
        preferGateway = object.optional("prefer_gateway") { reader in
            let text = try reader.nonEmptyString()
            guard text.utf8.count <= 64,
                text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0 != "/" && $0 != "+" && $0 != "#" })
            else {
                throw reader.fail(
                    "expected a gateway_id: up to 64 printable characters without '/', '+', '#' or spaces")
            }
            return text
        }
        preferAdapter = object.optional("prefer_adapter") { try $0.nonEmptyString() }
        let floor = object.optional("prefer_floor_dbm") { try $0.integer(in: -127...20) }
        if let floor { preferFloorDBm = floor }
        object.finish()
        if floor != nil, preferGateway == nil, preferAdapter == nil {
            problems.add(object.childPath("prefer_floor_dbm"), "needs prefer_gateway or prefer_adapter")
        }
        if name != nil, match.addresses.count != 1 {
            problems.add(object.childPath("name"), "a friendly name needs match.address naming exactly one device")
        }
        if !connect, wantsLink {
            problems.add(object.childPath("connect"), "must be true when subscribe or poll is given")
        }
    }

    /// `connection_params`: `min_interval_ms` and `max_interval_ms` (multiples of 1.25 ms),
    /// `latency` (connection events, default 0), `supervision_timeout_ms` (a multiple of 10 ms),
    /// held to the Core spec's ranges; a problem names the field.
    static func connectionParameters(_ reader: JSONReader, problems: ConfigProblems) -> ConnectionParameters? {
        guard var object = ConfigObject(reader, problems) else { return nil }
        func units(_ reader: JSONReader, step: Double, unit: String) throws -> UInt16 {
            let value = try reader.number()
            let count = value / step
            guard count.isFinite, count >= 0, count <= Double(UInt16.max), count == count.rounded() else {
                throw reader.fail("expected milliseconds, a multiple of \(unit), got \(value)")
            }
            return UInt16(count)
        }
        let minimum = object.required("min_interval_ms", expected: "milliseconds, 7.5 to 4000") {
            try units($0, step: 1.25, unit: "1.25 ms")
        }
        let maximum = object.required("max_interval_ms", expected: "milliseconds, 7.5 to 4000") {
            try units($0, step: 1.25, unit: "1.25 ms")
        }
        let latency = object.read("latency", default: 0) { UInt16(try $0.integer(in: 0...499)) }
        let timeout = object.required("supervision_timeout_ms", expected: "milliseconds, 100 to 32000") {
            try units($0, step: 10, unit: "10 ms")
        }
        object.finish()
        guard let minimum, let maximum, let timeout else { return nil }
        let parameters = ConnectionParameters(
            minInterval: minimum, maxInterval: maximum, latency: latency, supervisionTimeout: timeout)
        if let problem = parameters.problem(names: .config) {
            problems.add(object.path, problem)
            return nil
        }
        return parameters
    }
}
