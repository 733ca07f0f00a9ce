import Bluetooth
import JSON

/// One entry of a device rule's `commands`: what `<base>/<device>/set` may write.
public struct CommandSpec: Sendable, Equatable {
    /// The key in `/set` JSON and the last level of `/set/<command>`.
    public var name: String
    public var service: BluetoothUUID?
    public var characteristic: BluetoothUUID
    public var encoding: ValueEncoding
    /// Write Request (true, the default) or Write Command.
    public var withResponse: Bool
    /// Seconds after which a queued command is refused as `expired`; nil: `commands.ttl`.
    public var ttl: Double?
    public var minimum: Double?
    public var maximum: Double?
    /// `options`: the values Home Assistant offers (a `select` entity).
    public var options: [String]?
    /// `press`: the value a Home Assistant `button` sends.
    public var press: JSONValue?

    init?(name: String, _ reader: JSONReader, problems: ConfigProblems) {
        guard var object = ConfigObject(reader, problems) else { return nil }
        self.name = name
        if name.isEmpty || name.contains("/") || name.contains("+") || name.contains("#") || name == "transaction"
            || name == "timestamp"
        {
            problems.add(
                object.path,
                "\"\(name)\" is not a command name (expected a word without /, +, #; not transaction or timestamp)")
        }
        service = object.optional("service") { try $0.uuid() }
        let uuid = object.required("characteristic", expected: "a characteristic UUID such as \"FFF1\"") {
            try $0.uuid()
        }
        let encoding = object.required("encoding", expected: "one of \(ValueEncoding.names)") { try $0.encoding() }
        withResponse = object.read("response", default: true) { try $0.bool() }
        ttl = object.read("ttl", default: nil) { try $0.positiveDuration() }
        minimum = object.optional("minimum") { try $0.number() }
        maximum = object.optional("maximum") { try $0.number() }
        options = object.optional("options") { reader in
            let items = try reader.array().map { try $0.nonEmptyString() }
            guard !items.isEmpty else { throw reader.fail("expected a non-empty list of values") }
            return items
        }
        press = object.optional("press") { $0.value }
        object.finish()
        if options != nil, press != nil {
            problems.add(object.path, "options (a select) and press (a button) exclude each other")
        }
        if let minimum, let maximum, minimum > maximum {
            problems.add(object.childPath("minimum"), "\(minimum) is greater than maximum \(maximum)")
        }
        if (minimum != nil || maximum != nil), let encoding, !encoding.isNumeric {
            problems.add(object.path, "minimum/maximum need a numeric encoding, not \(encoding.rawValue)")
        }
        guard let uuid, let encoding else { return nil }
        characteristic = uuid
        self.encoding = encoding
    }
}
