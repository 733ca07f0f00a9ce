import Bluetooth
import JSON

/// The clock a command template reads when the payload does not give the time: the gateway's
/// wall clock and its local time zone offset.
public struct CommandTime: Sendable, Equatable {
    /// Seconds since 1970-01-01T00:00:00Z.
    public var unixSeconds: Int64
    /// The gateway's offset from UTC in seconds, east positive.
    public var utcOffsetSeconds: Int

    public init(unixSeconds: Int64, utcOffsetSeconds: Int) {
        self.unixSeconds = unixSeconds
        self.utcOffsetSeconds = utcOffsetSeconds
    }
}

/// A command's `template` (docs/config.md, "Command templates"): the written bytes as a list of
/// parts, fixed hex bytes or values encoded in a numeric layout. A value is a field of the
/// payload object or one of the time values (`timestamp`, `tz_offset`, `local_time`,
/// `tz_offset_minutes`), which default to the gateway's clock and time zone.
public struct CommandTemplate: Sendable, Equatable {
    public enum Part: Sendable, Equatable {
        case bytes([UInt8])
        case value(Value)
    }

    public struct Value: Sendable, Equatable {
        /// A time value's name or a payload field's.
        public var name: String
        public var type: ValueEncoding
        public var minimum: Double?
        public var maximum: Double?
        /// A payload field's value when the payload leaves it out; nil: the field is required.
        public var fallback: Double?
    }

    /// Values computed from the payload's `timestamp` and `tz_offset` (or the gateway's clock).
    static let timeValues = ["timestamp", "tz_offset", "tz_offset_minutes", "local_time"]

    public var parts: [Part]

    /// The members a payload object may have.
    public var fields: [String] {
        var names: [String] = []
        for case .value(let value) in parts {
            let added = Self.timeValues.contains(value.name) ? ["timestamp", "tz_offset"] : [value.name]
            for name in added where !names.contains(name) { names.append(name) }
        }
        return names
    }

    /// True when `{}` is a complete payload (every value has a default): a Home Assistant button.
    public var needsNoPayload: Bool {
        parts.allSatisfy {
            guard case .value(let value) = $0 else { return true }
            return Self.timeValues.contains(value.name) || value.fallback != nil
        }
    }

    init?(_ reader: JSONReader, problems: ConfigProblems) {
        guard let items = problems.attempt({ try reader.array() }) else { return nil }
        guard !items.isEmpty else {
            problems.add(
                reader.path, "expected a non-empty list of parts ({\"hex\": …} or {\"value\": …, \"type\": …})")
            return nil
        }
        var parts: [Part] = []
        var total = 0
        for item in items {
            guard let part = Self.part(item, problems: problems) else { continue }
            switch part {
            case .bytes(let bytes): total += bytes.count
            case .value(let value): total += value.type.integerLayout?.size ?? 4
            }
            parts.append(part)
        }
        guard parts.count == items.count else { return nil }
        guard total <= 512 else {
            problems.add(reader.path, "writes \(total) bytes; a characteristic value holds at most 512")
            return nil
        }
        self.parts = parts
    }

    private static func part(_ reader: JSONReader, problems: ConfigProblems) -> Part? {
        guard var object = ConfigObject(reader, problems) else { return nil }
        let bytes = object.optional("hex") { reader in
            let text = try reader.string()
            guard let bytes = Hex.decode(text), !bytes.isEmpty else {
                throw reader.fail("expected hex byte pairs such as \"5701\", got \"\(text)\"")
            }
            return bytes
        }
        let name = object.optional("value") { reader in
            let text = try reader.nonEmptyString()
            guard text != "transaction" else { throw reader.fail("\"transaction\" is not a field name") }
            return text
        }
        let type = object.optional("type") { reader in
            let encoding = try reader.encoding()
            guard encoding.isNumeric else {
                throw reader.fail("\"\(encoding.rawValue)\" is not a numeric type (expected u8 … s32be or float32le)")
            }
            return encoding
        }
        let minimum = object.optional("minimum") { try $0.number() }
        let maximum = object.optional("maximum") { try $0.number() }
        let fallback = object.optional("default") { try $0.number() }
        object.finish()
        switch (bytes, name) {
        case (let bytes?, nil):
            if type != nil || minimum != nil || maximum != nil || fallback != nil {
                problems.add(object.path, "a hex part takes no type, minimum, maximum or default")
                return nil
            }
            return .bytes(bytes)
        case (nil, let name?):
            guard let type else {
                problems.add(object.childPath("type"), "is required (a numeric encoding such as \"u32le\")")
                return nil
            }
            if let minimum, let maximum, minimum > maximum {
                problems.add(object.childPath("minimum"), "\(minimum) is greater than maximum \(maximum)")
                return nil
            }
            if fallback != nil, timeValues.contains(name) {
                problems.add(
                    object.childPath("default"), "\(name) defaults to the gateway's clock; it takes no default")
                return nil
            }
            return .value(Value(name: name, type: type, minimum: minimum, maximum: maximum, fallback: fallback))
        case (nil, nil):
            problems.add(object.path, "expected \"hex\" (fixed bytes) or \"value\" (a field or time value)")
            return nil
        case (.some, .some):
            problems.add(object.path, "a part has either \"hex\" or \"value\", not both")
            return nil
        }
    }

    /// True when the bytes for `payload` depend on the gateway's clock: a time value is used
    /// and the payload gives no `timestamp`.
    public func readsClock(_ payload: JSONValue) -> Bool {
        let usesTime = parts.contains {
            if case .value(let value) = $0 { return Self.timeValues.contains(value.name) }
            return false
        }
        guard usesTime else { return false }
        if case .object(let members) = payload, members.contains(where: { $0.key == "timestamp" && $0.value != .null })
        {
            return false
        }
        return true
    }

    /// The bytes for a payload object (`{}` takes every default); the error names the field.
    public func encode(_ payload: JSONValue, time: CommandTime) throws(CommandError) -> [UInt8] {
        let members: [(key: String, value: JSONValue)]
        switch payload {
        case .object(let object): members = object
        // null and "" (what `/get` takes for "no value") stand for {}.
        case .null, .string(""): members = []
        default:
            throw CommandError(
                "expected a JSON object\(fields.isEmpty ? " ({})" : " with \(fields.joined(separator: ", "))"), got \(ValueEncoding.describe(payload))"
            )
        }
        let allowed = fields
        for (key, _) in members where !allowed.contains(key) {
            throw CommandError(
                "\"\(key)\" is not a field of this command"
                    + (allowed.isEmpty ? " (it takes {})" : " (expected \(allowed.joined(separator: ", ")))"))
        }
        func member(_ key: String) -> JSONValue? { members.last { $0.key == key }?.value }
        var bytes: [UInt8] = []
        for part in parts {
            switch part {
            case .bytes(let fixed): bytes += fixed
            case .value(let value):
                let number = try self.number(value, member: member, time: time)
                do {
                    bytes += try value.type.encode(.number(number), minimum: value.minimum, maximum: value.maximum)
                } catch {
                    throw CommandError("\(value.name): \(error.message)")
                }
            }
        }
        return bytes
    }

    private func number(_ value: Value, member: (String) -> JSONValue?, time: CommandTime) throws(CommandError)
        -> Double
    {
        guard Self.timeValues.contains(value.name) else {
            switch member(value.name) {
            case .number(let number): return number
            case nil, .null?:
                guard let fallback = value.fallback else { throw CommandError("\(value.name) is required") }
                return fallback
            case let other?:
                throw CommandError("\(value.name): expected a number, got \(ValueEncoding.describe(other))")
            }
        }
        let timestamp: Double
        switch member("timestamp") {
        case nil, .null?: timestamp = Double(time.unixSeconds)
        case .number(let number) where number >= 0 && number < 1e11 && number.rounded() == number:
            timestamp = number
        case let other?:
            throw CommandError(
                "timestamp: expected whole seconds since 1970 (UTC), got \(ValueEncoding.describe(other))")
        }
        // Hours east of UTC, in quarter hours from -12 to +14 (every zone in use).
        let offsetHours: Double
        switch member("tz_offset") {
        case nil, .null?: offsetHours = Double(time.utcOffsetSeconds) / 3600
        case .number(let number) where number >= -12 && number <= 14 && (number * 4).rounded() == number * 4:
            offsetHours = number
        case let other?:
            throw CommandError(
                "tz_offset: expected hours east of UTC, -12 to 14 in quarter hours, got \(ValueEncoding.describe(other))"
            )
        }
        switch value.name {
        case "timestamp": return timestamp
        case "tz_offset":
            guard value.type == .float32le || offsetHours.rounded() == offsetHours else {
                throw CommandError(
                    "tz_offset: this device takes whole hours, the offset is \(ValueEncoding.text(offsetHours)) (give tz_offset)"
                )
            }
            return offsetHours
        case "tz_offset_minutes": return (offsetHours * 60).rounded()
        default: return timestamp + (offsetHours * 3600).rounded()
        }
    }
}
