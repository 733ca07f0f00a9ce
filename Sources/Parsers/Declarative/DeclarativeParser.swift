import Bluetooth
import JSON

/// A parser defined in config.json instead of Swift, for devices without a built-in decoder.
///
/// ```json
/// "parsers": {
///   "my_sensor": {
///     "match": { "manufacturer_id": 1234 },          // or { "service_data": "FFF0" }; omit for a
///                                                    // characteristic parser ("characteristic": "2A6E" optional)
///     "fields": [
///       { "name": "temperature", "offset": 2, "type": "s16le", "scale": 0.01,
///         "unit": "°C", "device_class": "temperature" },
///       { "name": "battery", "offset": 4, "type": "u8", "value_offset": 0 }
///     ]
///   }
/// }
/// ```
/// A field's value is `raw × scale + value_offset`. A payload too short for a field is a
/// `too_short` error. Config errors name the JSON path: ``init(name:json:path:)``.
public struct DeclarativeParser: CharacteristicParser, AdvertisementParser {
    /// Field value types: integers by size, sign and byte order, IEEE 754 float32, the
    /// IEEE-11073 SFLOAT/FLOAT, UTF-8 text and hex.
    public enum FieldType: String, Sendable, CaseIterable {
        case u8, s8, u16le, u16be, s16le, s16be, u24le, u24be, s24le, s24be, u32le, u32be, s32le, s32be
        case float32le, float32be, sfloat, float, utf8, hex

        var size: Int {
            switch self {
            case .u8, .s8: 1
            case .u16le, .u16be, .s16le, .s16be, .sfloat: 2
            case .u24le, .u24be, .s24le, .s24be: 3
            case .u32le, .u32be, .s32le, .s32be, .float32le, .float32be, .float: 4
            case .utf8, .hex: 0
            }
        }
    }

    public struct Field: Sendable {
        public var name: String
        public var offset: Int
        public var type: FieldType
        /// Bytes for `utf8`/`hex`; nil means to the end of the payload.
        public var length: Int?
        public var scale: Double
        public var valueOffset: Double
        public var unit: ReadingUnit?
        public var deviceClass: DeviceClass?
    }

    /// A config error; ``description`` starts with the JSON path.
    public struct ConfigError: Error, Sendable, CustomStringConvertible {
        public var path: String
        public var message: String
        public var description: String { "\(path): \(message)" }
    }

    public let name: String
    public let uuid: BluetoothUUID?
    public let keys: [AdvertisementKey]
    public let fields: [Field]
    public var format: String { name }

    /// Builds a parser from its JSON object; `path` is where the object sits in config.json, e.g.
    /// `parsers.my_sensor`, and starts every error's path.
    public init(name: String, json: JSONValue, path: String) throws(ConfigError) {
        guard case .object(let object) = json else { throw ConfigError(path: path, message: "expected an object") }
        self.name = name
        var keys: [AdvertisementKey] = []
        if let match = Self.member(object, "match") {
            guard case .object(let match) = match else {
                throw ConfigError(path: path + ".match", message: "expected an object")
            }
            if let id = Self.member(match, "manufacturer_id") {
                guard let number = Self.integer(id), (0...0xFFFF).contains(number) else {
                    throw ConfigError(
                        path: path + ".match.manufacturer_id",
                        message: "\(Self.describe(id)) is not a company id (expected 0-65535)")
                }
                keys.append(.manufacturer(UInt16(number)))
            }
            if let service = Self.member(match, "service_data") {
                guard case .string(let text) = service, let short = BluetoothUUID(text)?.uint16 else {
                    throw ConfigError(
                        path: path + ".match.service_data",
                        message: "\"\(Self.describe(service))\" is not a 16-bit service UUID (e.g. \"FFF0\")")
                }
                keys.append(.serviceData(short))
            }
            if keys.isEmpty {
                throw ConfigError(path: path + ".match", message: "expected manufacturer_id or service_data")
            }
        }
        self.keys = keys
        if let characteristic = Self.member(object, "characteristic") {
            guard case .string(let text) = characteristic, let uuid = BluetoothUUID(text) else {
                throw ConfigError(
                    path: path + ".characteristic", message: "\"\(Self.describe(characteristic))\" is not a UUID")
            }
            self.uuid = uuid
        } else {
            self.uuid = nil
        }
        guard case .array(let list)? = Self.member(object, "fields"), !list.isEmpty else {
            throw ConfigError(path: path + ".fields", message: "expected a non-empty list of fields")
        }
        var fields: [Field] = []
        for (index, item) in list.enumerated() {
            fields.append(try Self.field(item, path: "\(path).fields[\(index)]"))
        }
        self.fields = fields
    }

    static func field(_ json: JSONValue, path: String) throws(ConfigError) -> Field {
        guard case .object(let object) = json else { throw ConfigError(path: path, message: "expected an object") }
        guard case .string(let name)? = member(object, "name"), !name.isEmpty else {
            throw ConfigError(path: path + ".name", message: "expected a non-empty string")
        }
        guard let offset = member(object, "offset").flatMap(integer), offset >= 0 else {
            throw ConfigError(path: path + ".offset", message: "expected a byte offset ≥ 0")
        }
        let typeText = string(member(object, "type")) ?? ""
        guard let type = FieldType(rawValue: typeText) else {
            let expected = FieldType.allCases.map(\.rawValue).joined(separator: ", ")
            throw ConfigError(
                path: path + ".type", message: "\"\(typeText)\" is not a field type (expected one of \(expected))")
        }
        func number(_ key: String, default value: Double) throws(ConfigError) -> Double {
            guard let raw = member(object, key) else { return value }
            guard case .number(let number) = raw else {
                throw ConfigError(path: path + "." + key, message: "expected a number")
            }
            return number
        }
        var length: Int?
        if let raw = member(object, "length") {
            guard let value = integer(raw), value >= 0 else {
                throw ConfigError(path: path + ".length", message: "expected a length ≥ 0")
            }
            length = value
        }
        return Field(
            name: name, offset: offset, type: type, length: length, scale: try number("scale", default: 1),
            valueOffset: try number("value_offset", default: 0),
            unit: string(member(object, "unit")).map { ReadingUnit($0) },
            deviceClass: string(member(object, "device_class")).map(DeviceClass.init(rawValue:)))
    }

    /// Builds every parser of a config's `parsers` object, in the order of their names.
    public static func parsers(fromJSON json: JSONValue, path: String = "parsers") throws(ConfigError)
        -> [DeclarativeParser]
    {
        guard case .object(let object) = json else { throw ConfigError(path: path, message: "expected an object") }
        var parsers: [DeclarativeParser] = []
        for name in Set(object.map(\.key)).sorted() {
            guard let value = member(object, name) else { continue }
            parsers.append(try DeclarativeParser(name: name, json: value, path: "\(path).\(name)"))
        }
        return parsers
    }

    // MARK: JSON

    /// The value of `key` in an object's members (the last, when a key repeats); also `null`.
    private static func member(_ members: [(key: String, value: JSONValue)], _ key: String) -> JSONValue? {
        members.last { $0.key == key }?.value
    }

    /// A number that is an integer (and exact as a double).
    private static func integer(_ value: JSONValue) -> Int? {
        guard case .number(let number) = value, abs(number) < 9e15 else { return nil }
        return Int(exactly: number)
    }

    private static func string(_ value: JSONValue?) -> String? {
        guard case .string(let text)? = value else { return nil }
        return text
    }

    /// A value as an error message quotes it: a string's text, an integer without a fraction.
    private static func describe(_ value: JSONValue) -> String {
        switch value {
        case .string(let text): text
        case .number: integer(value).map(String.init) ?? value.serialized
        default: value.serialized
        }
    }

    public func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        var readings: [Reading] = []
        readings.reserveCapacity(fields.count)
        for field in fields {
            var reader = ByteReader(value, from: field.offset, what: "field \(field.name)")
            guard field.offset <= value.count else {
                throw .tooShort("field \(field.name)", need: field.offset + max(field.type.size, 1), got: value.count)
            }
            let raw: Double
            switch field.type {
            case .u8, .u16le, .u24le, .u32le: raw = Double(try reader.uintLE(field.type.size))
            case .u16be, .u24be, .u32be: raw = Double(try reader.uintBE(field.type.size))
            case .s8, .s16le, .s24le, .s32le: raw = Double(try reader.intLE(field.type.size))
            case .s16be, .s24be, .s32be: raw = Double(try reader.intBE(field.type.size))
            case .float32le: raw = Double(Float(bitPattern: UInt32(truncatingIfNeeded: try reader.uintLE(4))))
            case .float32be: raw = Double(Float(bitPattern: UInt32(truncatingIfNeeded: try reader.uintBE(4))))
            case .sfloat, .float:
                let medical = field.type == .sfloat ? try reader.sfloat() : try reader.medfloat()
                guard case .number(let number) = medical else {
                    readings.append(field.name, medical, unit: field.unit, deviceClass: field.deviceClass)
                    continue
                }
                raw = number
            case .utf8, .hex:
                let bytes = try reader.bytes(field.length ?? reader.remaining)
                let text = field.type == .hex ? Hex.encode(bytes) : try utf8String(bytes, what: field.name)
                readings.append(
                    Reading(name: field.name, value: .string(text), unit: field.unit, deviceClass: field.deviceClass))
                continue
            }
            readings.append(
                Reading(
                    name: field.name, value: .number(raw * field.scale + field.valueOffset), unit: field.unit,
                    deviceClass: field.deviceClass))
        }
        return readings
    }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext) throws(ParseError)
        -> [Reading]?
    {
        try decode(payload)
    }
}
