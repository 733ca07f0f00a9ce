import JSON
import Parsers

/// A declarative parser definition (config.json `parsers.NAME`) built from fuzzed bytes, so the
/// mutator changes fields, offsets, types, lengths and scales rather than JSON punctuation.
///
/// Encoding: match byte (`% 4`: none, `manufacturer_id` u16, `service_data` u16, both), a
/// characteristic flag byte (bit 0: a `characteristic` u16 UUID follows), a field count byte
/// (`% 9`; 0 is the invalid empty list), then per field: type (u8 index into the field types;
/// past them an invalid name), offset (u8 selector: below 0xF0 itself, else a boundary value
/// from ``boundaries``), length (u8: 0 absent, else value − 1, 0xFF a boundary), scale and
/// value_offset (u8 selectors into ``numbers``, 0xFF: a raw 64-bit double), unit and device
/// class flags (bit 0 unit, bit 1 device class, bit 2 an extra unknown key), name chunk.
enum DeclarativeDefinition {
    static let types = DeclarativeParser.FieldType.allCases.map(\.rawValue)
    static let boundaries: [Double] = [
        -1, 255, 256, 65_535, 1e6, 2_147_483_647, 4_294_967_296, 9_007_199_254_740_991, 9e15, 9.3e18, 1e300, 0.5,
    ]
    static let numbers: [Double] = [
        1, 0, -1, 0.01, 0.1, 1e-300, 1e300, 1.7976931348623157e308, -1.7976931348623157e308,
        Double.leastNonzeroMagnitude, 100,
    ]

    static func read(_ input: inout FuzzInput) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = []
        let match = input.byte() % 4
        if match != 0 {
            var clauses: [(key: String, value: JSONValue)] = []
            if match & 1 != 0 { clauses.append(("manufacturer_id", .number(Double(input.uint16())))) }
            if match & 2 != 0 { clauses.append(("service_data", .string(hex(input.uint16())))) }
            members.append(("match", .object(clauses)))
        }
        if input.byte() & 1 != 0 { members.append(("characteristic", .string(hex(input.uint16())))) }
        var fields: [JSONValue] = []
        for _ in 0..<(Int(input.byte()) % 9) {
            var field: [(key: String, value: JSONValue)] = []
            let type = Int(input.byte())
            let offset = input.byte()
            let length = input.byte()
            let scale = number(&input)
            let valueOffset = number(&input)
            let flags = input.byte()
            let name = input.string(limit: 24)
            field.append(("name", .string(name)))
            field.append(
                ("offset", .number(offset < 0xF0 ? Double(offset) : boundaries[Int(offset - 0xF0) % boundaries.count])))
            field.append(("type", .string(type < types.count ? types[type] : "u\(type)")))
            if length != 0 {
                field.append(
                    ("length", .number(length == 0xFF ? boundaries[Int(flags) % boundaries.count] : Double(length - 1)))
                )
            }
            if let scale { field.append(("scale", .number(scale))) }
            if let valueOffset { field.append(("value_offset", .number(valueOffset))) }
            if flags & 1 != 0 { field.append(("unit", .string("°C"))) }
            if flags & 2 != 0 { field.append(("device_class", .string("temperature"))) }
            if flags & 4 != 0 { field.append(("extra", .bool(true))) }
            fields.append(.object(field))
        }
        members.append(("fields", .array(fields)))
        return .object(members)
    }

    /// Nil (the key absent), a listed number or a raw double (finite ones only: JSON has no others).
    static func number(_ input: inout FuzzInput) -> Double? {
        let selector = input.byte()
        if selector == 0xFE { return nil }
        if selector == 0xFF {
            let value = Double(bitPattern: input.uint64())
            return value.isFinite ? value : 0
        }
        return numbers[Int(selector) % numbers.count]
    }

    static func hex(_ value: UInt16) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: 4 - digits.count) + digits
    }

    /// The parser objects of config.json's and the docs' `parsers` sections, as JSON text.
    static func repositoryDefinitions() -> [[UInt8]] {
        var documents: [[UInt8]] = []
        if let bytes = FixtureFiles.repositoryFile("config.json") { documents.append(bytes) }
        for path in FixtureFiles.repositoryFiles(in: "docs", suffix: ".md") {
            documents += FixtureFiles.markdownJSONBlocks(path)
        }
        var definitions: [[UInt8]] = []
        for document in documents {
            // Docs show `"parsers": {…}` on its own: made an object to parse it.
            let text =
                document.first(where: { $0 != 0x20 && $0 != 0x0A }) == UInt8(ascii: "\"")
                ? Array("{".utf8) + document + Array("}".utf8) : document
            guard let value = try? JSONValue.parse(text), case .object(let parsers)? = value["parsers"] else {
                continue
            }
            for parser in parsers { definitions.append(Array(parser.value.serialized.utf8)) }
        }
        return definitions
    }

    /// Hand-made structures: every field type at offset 1, text fields with lengths, a match.
    static let structuredSeeds: [[UInt8]] = {
        var seeds: [[UInt8]] = []
        for (index, _) in types.enumerated() {
            var builder = FuzzInputBuilder()
            builder.byte(1)
            builder.byte(UInt8(index % 4))
            if index % 4 & 1 != 0 { builder.uint16(0x0499) }
            if index % 4 & 2 != 0 { builder.uint16(0xFFF0) }
            builder.byte(UInt8(index % 2))
            if index % 2 == 1 { builder.uint16(0x2A6E) }
            builder.byte(2)
            for (type, length) in [(index, 0), ((index + 7) % types.count, 3)] {
                builder.byte(UInt8(type))
                builder.byte(1)
                builder.byte(UInt8(length))
                builder.byte(3)
                builder.byte(0xFE)
                builder.byte(3)
                builder.string("field\(type)")
            }
            seeds.append(builder.bytes)
        }
        return seeds
    }()
}
