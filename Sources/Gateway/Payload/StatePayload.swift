import JSON
import Parsers

/// Builds the JSON state message of a device: every current attribute, then `rssi`,
/// `linkquality` and `last_seen`, into a reused byte buffer. The attributes refer to their names
/// by index: `keys` are the ``AttributeTable``'s names as JSON keys (`"temperature":`), escaped
/// once rather than per message.
enum StatePayload {
    static func write(
        _ attributes: [Attribute], keys: [[UInt8]], rssi: Int?, lastSeen: Int64?,
        into bytes: inout [UInt8], timestamps: inout Timestamp.Cache
    ) {
        bytes.removeAll(keepingCapacity: true)
        bytes.append(UInt8(ascii: "{"))
        var first = true
        for attribute in attributes {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            bytes.append(contentsOf: keys[Int(attribute.name)])
            writeValue(attribute.stored, into: &bytes)
        }
        if let rssi {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            bytes.append(contentsOf: "\"rssi\":".utf8)
            JSONValue.writeInteger(Int64(rssi), into: &bytes)
            bytes.append(contentsOf: ",\"linkquality\":".utf8)
            JSONValue.writeInteger(Int64(LinkQuality.from(rssi: rssi)), into: &bytes)
        }
        if let lastSeen {
            if !first { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: "\"last_seen\":".utf8)
            Timestamp.write(milliseconds: lastSeen, into: &bytes, quoted: true, cache: &timestamps)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// `name` as a JSON object key with its colon: `"name":`.
    static func key(_ name: String) -> [UInt8] {
        var bytes: [UInt8] = []
        JSONValue.writeString(name, into: &bytes)
        bytes.append(UInt8(ascii: ":"))
        return bytes
    }

    /// A reading value as JSON (state payload) text.
    static func writeValue(_ value: ReadingValue, into bytes: inout [UInt8]) {
        switch value {
        case .number(let number): JSONValue.writeNumber(number, into: &bytes)
        case .bool(let flag): bytes.append(contentsOf: (flag ? "true" : "false").utf8)
        case .string(let text): JSONValue.writeString(text, into: &bytes)
        case .null: bytes.append(contentsOf: "null".utf8)
        case .numbers(let numbers):
            bytes.append(UInt8(ascii: "["))
            for (index, number) in numbers.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                JSONValue.writeNumber(number, into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        }
    }

    /// A stored value as JSON text, without making a ``ReadingValue`` of it.
    static func writeValue(_ value: StoredValue, into bytes: inout [UInt8]) {
        switch value {
        case .number(let number): JSONValue.writeNumber(number, into: &bytes)
        case .bool(let flag): bytes.append(contentsOf: (flag ? "true" : "false").utf8)
        case .null: bytes.append(contentsOf: "null".utf8)
        case .boxed(let value): writeValue(value, into: &bytes)
        }
    }

    /// A reading value as the plain payload of a per-attribute topic (strings unquoted).
    static func plain(_ value: ReadingValue) -> [UInt8] {
        if case .string(let text) = value { return Array(text.utf8) }
        var bytes: [UInt8] = []
        writeValue(value, into: &bytes)
        return bytes
    }
}
