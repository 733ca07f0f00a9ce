import Bluetooth
import JSON

/// Turns one JSON line in the test-vector input format into one JSON output line; the logic
/// behind `gattway decode`.
///
/// Input keys: `manufacturer_data` {company id in decimal: hex}, `service_data` {uuid: hex},
/// `service_uuids`, `name`, `address`, `bindkey`; or `uuid` + `hex` for a characteristic value.
/// Output: `{"format":"…","readings":{…}}` or `{"error":"…"}`. Never throws: every failure,
/// including malformed JSON, becomes an error line.
public struct VectorLineDecoder: Sendable {
    public var registry: ParserRegistry

    public init(registry: ParserRegistry = .active) {
        self.registry = registry
    }

    /// Decodes one line; returns the output line without a trailing newline.
    public func decode(line: String) -> String {
        guard let value = try? JSONValue.parse(Array(line.utf8)), let input = Self.plain(value) as? [String: Any]
        else { return Self.errorLine("input is not a JSON object") }
        switch Self.parse(input) {
        case .failure(let error):
            return Self.errorLine(error.message)
        case .success(.characteristic(let uuid, let bytes)):
            do throws(ParseError) {
                let readings = try registry.decode(characteristic: uuid, value: bytes)
                let format = registry.characteristicParser(for: uuid)?.name ?? uuid.shortDescription
                return Self.outputLine(format: format, readings: readings)
            } catch {
                return Self.errorLine(error.description)
            }
        case .success(.advertisement(let context)):
            do throws(ParseError) {
                let decoded = try registry.decode(context)
                return Self.outputLine(format: decoded.format, readings: decoded.readings)
            } catch {
                return Self.errorLine(error.description)
            }
        }
    }

    /// A parsed input line.
    public enum Input: Sendable {
        case characteristic(BluetoothUUID, [UInt8])
        case advertisement(AdvertisementContext)
    }

    /// Parses a JSON object in the vector input format.
    public static func parse(_ input: [String: Any]) -> Result<Input, InputErrorMessage> {
        if let uuidText = input["uuid"] as? String {
            guard let uuid = BluetoothUUID(uuidText) else {
                return .failure("uuid: \"\(uuidText)\" is not a Bluetooth UUID")
            }
            guard let hex = input["hex"] as? String, let bytes = Hex.decode(hex, separators: "") else {
                return .failure("hex: expected an even-length hex string")
            }
            return .success(.characteristic(uuid, bytes))
        }
        var advertisement = AdvertisementData()
        advertisement.localName = input["name"] as? String
        do throws(InputErrorMessage) {
            advertisement.manufacturerData = try hexObject(
                input, "manufacturer_data", keys: "a decimal company id (0-65535)", { UInt16($0) })
            advertisement.serviceData = try hexObject(input, "service_data", keys: "a UUID", { BluetoothUUID($0) })
        } catch {
            return .failure(error)
        }
        if let uuids = input["service_uuids"] as? [String] {
            advertisement.serviceUUIDs = uuids.compactMap(BluetoothUUID.init)
        }
        var address: BluetoothAddress?
        if let text = input["address"] as? String {
            guard let parsed = BluetoothAddress(text) else {
                return .failure(
                    "address: \"\(text)\" is not a Bluetooth address (expected six hex octets, e.g. A4:C1:38:0B:12:34)")
            }
            address = parsed
        }
        var key: [UInt8]?
        if let text = input["bindkey"] as? String {
            guard let bytes = Hex.decode(text, separators: ""), bytes.count == 16 else {
                return .failure("bindkey: expected 32 hex digits (a 16-byte AES key)")
            }
            key = bytes
        }
        guard !advertisement.manufacturerData.isEmpty || !advertisement.serviceData.isEmpty else {
            return .failure("input has neither uuid+hex nor manufacturer_data/service_data")
        }
        return .success(
            .advertisement(AdvertisementContext(advertisement: advertisement, address: address, bindKey: key)))
    }

    /// The `{"KEY": "HEX", …}` object `input[field]` (none when absent), each key read by `key`
    /// (a key it refuses is not `keys`).
    private static func hexObject<Key: Hashable>(
        _ input: [String: Any], _ field: String, keys: String, _ key: (String) -> Key?
    ) throws(InputErrorMessage) -> [Key: [UInt8]] {
        var object: [Key: [UInt8]] = [:]
        for (text, value) in input[field] as? [String: Any] ?? [:] {
            guard let parsed = key(text) else { throw "\(field): key \"\(text)\" is not \(keys)" }
            guard let hex = value as? String, let bytes = Hex.decode(hex, separators: "") else {
                throw "\(field).\(text): expected an even-length hex string"
            }
            object[parsed] = bytes
        }
        return object
    }

    /// An input error message (a `Result` failure).
    public struct InputErrorMessage: Error, ExpressibleByStringLiteral, ExpressibleByStringInterpolation, Sendable {
        public var message: String
        public init(stringLiteral value: String) { message = value }
        public init(stringInterpolation: DefaultStringInterpolation) {
            message = String(stringInterpolation: stringInterpolation)
        }
    }

    /// A parsed JSON value as the `[String: Any]` / `[Any]` / `String` / `Double` / `Bool` tree
    /// ``parse(_:)`` takes (what `JSONSerialization` would give, without Foundation).
    static func plain(_ value: JSONValue) -> Any {
        switch value {
        case .null: Optional<Any>.none as Any
        case .bool(let flag): flag
        case .number(let number): number
        case .string(let text): text
        case .array(let items): items.map(plain)
        case .object(let members):
            Dictionary(members.map { ($0.key, plain($0.value)) }, uniquingKeysWith: { _, last in last })
        }
    }

    static func errorLine(_ message: String) -> String {
        "{\"error\":" + JSONText.string(message) + "}"
    }

    static func outputLine(format: String, readings: [Reading]) -> String {
        "{\"format\":" + JSONText.string(format) + ",\"readings\":" + JSONText.readings(readings) + "}"
    }
}

/// Minimal JSON writing for readings (no Foundation encoder on this path).
public enum JSONText {
    /// A JSON string literal with the required escapes.
    public static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// A number: integers without a fraction, others in Swift's shortest round-trip form.
    public static func number(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    public static func value(_ value: ReadingValue) -> String {
        switch value {
        case .number(let number): JSONText.number(number)
        case .bool(let flag): flag ? "true" : "false"
        case .string(let text): string(text)
        case .null: "null"
        case .numbers(let list): "[" + list.map(number).joined(separator: ",") + "]"
        }
    }

    /// `{"temperature":21.5,…}` — values only; units are documented per reading.
    public static func readings(_ readings: [Reading]) -> String {
        "{" + readings.map { string($0.name) + ":" + value($0.value) }.joined(separator: ",") + "}"
    }
}
