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
    /// Commands in file order.
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
        commands = []
        if let value = object.value("commands"), let commandsObject = ConfigObject(value, problems) {
            for (key, item) in commandsObject.reader.entries() {
                if let command = CommandSpec(name: key, item, problems: problems) { commands.append(command) }
            }
        }
        rawGATT = object.read("raw_gatt", default: false) { try $0.bool() }
        rateControl = RateControlSettings(&object)
        retain = object.optional("retain") { try $0.bool() }
        qos = object.optional("qos") { try $0.qos() }
        attributeTopics = object.optional("attribute_topics") { try $0.bool() }
        availabilityTimeout = object.optional("availability_timeout") { try $0.positiveDuration() }
        object.finish()
        if name != nil, match.addresses.count != 1 {
            problems.add(object.childPath("name"), "a friendly name needs match.address naming exactly one device")
        }
        if !connect, wantsLink {
            problems.add(object.childPath("connect"), "must be true when subscribe or poll is given")
        }
    }
}
