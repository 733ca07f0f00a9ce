import Bluetooth
import JSON

/// One entry of a device rule's `commands`: what `<base>/<device>/set` may write.
public struct CommandSpec: Sendable, Equatable {
    /// The key in `/set` JSON and the last level of `/set/<command>`.
    public var name: String
    public var service: BluetoothUUID?
    public var characteristic: BluetoothUUID
    /// How a value becomes bytes; `json` for a ``template`` command (its payload is a JSON object).
    public var encoding: ValueEncoding
    /// `template`: the written bytes built from fixed parts, payload fields and the gateway's
    /// clock, instead of one value in ``encoding``.
    public var template: CommandTemplate?
    /// Write Request (true, the default) or Write Command.
    public var withResponse: Bool
    /// Seconds after which a queued command is refused as `expired`; nil: `commands.ttl`.
    public var ttl: Double?
    public var minimum: Double?
    public var maximum: Double?
    /// `options`: the values Home Assistant offers (a `select` entity).
    public var options: [String]?
    /// `press`: the value a Home Assistant `button` sends; `{}` for a template command that needs
    /// no payload.
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
        let templateReader = object.value("template")
        var encoding: ValueEncoding?
        if let templateReader {
            template = CommandTemplate(templateReader, problems: problems)
            if object.value("encoding") != nil {
                problems.add(object.childPath("encoding"), "a command has either encoding or template, not both")
            }
            encoding = template == nil ? nil : .json
        } else {
            template = nil
            encoding = object.required("encoding", expected: "one of \(ValueEncoding.names), or a template") {
                try $0.encoding()
            }
        }
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
        if let template {
            if options != nil || minimum != nil || maximum != nil {
                problems.add(
                    object.path, "a template command takes no options, minimum or maximum (give them per part)")
            }
            // A template that needs nothing from the payload is a button sending {}.
            if press == nil, options == nil, template.needsNoPayload { press = .object([]) }
        }
        if options != nil, press != nil {
            problems.add(object.path, "options (a select) and press (a button) exclude each other")
        }
        if let minimum, let maximum, minimum > maximum {
            problems.add(object.childPath("minimum"), "\(minimum) is greater than maximum \(maximum)")
        }
        if template == nil, minimum != nil || maximum != nil, let encoding, !encoding.isNumeric {
            problems.add(object.path, "minimum/maximum need a numeric encoding, not \(encoding.rawValue)")
        }
        guard let uuid, let encoding else { return nil }
        characteristic = uuid
        self.encoding = encoding
    }
}

extension CommandSpec {
    /// The value of a `/set/<command>` payload: the encoding's reading of the text; for a
    /// template command the JSON object (an empty payload is `{}`).
    func value(fromPlainText text: String) throws(CommandError) -> JSONValue {
        guard template != nil else { return try encoding.value(fromPlainText: text) }
        if text.trimmingSpaces().isEmpty { return .object([]) }
        do { return try JSONValue.parse(Array(text.utf8)) } catch {
            throw CommandError("the value is not JSON: \(error)")
        }
    }

    /// The bytes to write for `value`, checked against the encoding and range or the template.
    func encode(_ value: JSONValue, time: CommandTime) throws(CommandError) -> [UInt8] {
        if let template { return try template.encode(value, time: time) }
        return try encoding.encode(value, minimum: minimum, maximum: maximum)
    }
}
