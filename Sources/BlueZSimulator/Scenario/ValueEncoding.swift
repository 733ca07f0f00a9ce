import Bluetooth
import JSON

/// How a number becomes characteristic bytes: an integer layout and a scale, so `21.5` with
/// `s16le` and scale `0.01` is `66 08` (2150), as the SIG temperature characteristic 0x2A6E wants.
public struct NumberFormat: Sendable, Equatable {
    public enum Layout: String, Sendable, CaseIterable {
        case u8, s8, u16le, s16le, u16be, s16be, u24le, u32le, s32le, u32be, s32be, float32le

        var byteCount: Int {
            switch self {
            case .u8, .s8: 1
            case .u16le, .s16le, .u16be, .s16be: 2
            case .u24le: 3
            case .u32le, .s32le, .u32be, .s32be, .float32le: 4
            }
        }

        var range: ClosedRange<Double> {
            switch self {
            case .u8: 0...255
            case .s8: -128...127
            case .u16le, .u16be: 0...65535
            case .s16le, .s16be: -32768...32767
            case .u24le: 0...16_777_215
            case .u32le, .u32be: 0...4_294_967_295
            case .s32le, .s32be: -2_147_483_648...2_147_483_647
            case .float32le: -Double(Float.greatestFiniteMagnitude)...Double(Float.greatestFiniteMagnitude)
            }
        }
    }

    public var layout: Layout
    /// The value is divided by `scale` before encoding (raw = value / scale).
    public var scale: Double

    public init(_ layout: Layout, scale: Double = 1) {
        self.layout = layout
        self.scale = scale
    }

    /// Encodes `value`, clamped to the layout's range.
    public func encode(_ value: Double) -> [UInt8] {
        if layout == .float32le {
            let bits = Float(value / scale).bitPattern
            return (0..<4).map { UInt8(truncatingIfNeeded: bits >> (8 * $0)) }
        }
        let raw = min(max((value / scale).rounded(), layout.range.lowerBound), layout.range.upperBound)
        let integer = UInt64(bitPattern: Int64(saturating: raw))
        let count = layout.byteCount
        let littleEndian = (0..<count).map { UInt8(truncatingIfNeeded: integer >> (8 * UInt64($0))) }
        switch layout {
        case .u16be, .s16be, .u32be, .s32be: return littleEndian.reversed()
        default: return littleEndian
        }
    }
}

/// A characteristic value or advertisement payload in a scenario: fixed bytes, a generated
/// number in a given format, or (for advertisements) a template of a known sensor format.
public enum PayloadSpec: Sendable, Equatable {
    /// Fixed bytes, written in the scenario as `{"hex": "0a0b"}` or `{"utf8": "text"}`.
    case bytes([UInt8])
    /// A number encoded by `format`: `{"number": <generator>, "format": "s16le", "scale": 0.01}`.
    case number(NumberGenerator, NumberFormat)
    /// A sensor advertisement: `{"template": "bthome_v2", "fields": {"temperature": <generator>}}`.
    case template(AdvertisementTemplate, fields: [String: NumberGenerator])

    static func read(_ reader: JSONReader) throws -> PayloadSpec {
        let object = try reader.object()
        if let hex = object.optional("hex") {
            let text = try hex.string()
            guard let bytes = Hex.decode(text, separators: " ") else {
                throw hex.fail("expected an even number of hex digits, got \"\(text)\"")
            }
            try object.finish()
            return .bytes(bytes)
        }
        if let utf8 = object.optional("utf8") {
            let bytes = Array(try utf8.string().utf8)
            try object.finish()
            return .bytes(bytes)
        }
        if let number = object.optional("number") {
            let generator = try NumberGenerator.read(number)
            let formatReader = try object.required("format")
            let name = try formatReader.string()
            guard let layout = NumberFormat.Layout(rawValue: name) else {
                throw formatReader.fail(
                    "\"\(name)\" is not a number format (expected one of \(NumberFormat.Layout.allCases.map(\.rawValue).joined(separator: ", ")))"
                )
            }
            let scale = try object.optional("scale")?.number() ?? 1
            guard scale != 0 else { throw object.optional("scale")!.fail("scale must not be 0") }
            try object.finish()
            return .number(generator, NumberFormat(layout, scale: scale))
        }
        if let template = object.optional("template") {
            let name = try template.string()
            guard let kind = AdvertisementTemplate(rawValue: name) else {
                throw template.fail(
                    "\"\(name)\" is not a template (expected one of \(AdvertisementTemplate.allCases.map(\.rawValue).joined(separator: ", ")))"
                )
            }
            var fields: [String: NumberGenerator] = [:]
            if let fieldsReader = object.optional("fields") {
                for (key, value) in try fieldsReader.object().entries() {
                    guard kind.fieldNames.contains(key) else {
                        throw value.fail(
                            "is not a field of \(name) (expected one of \(kind.fieldNames.joined(separator: ", ")))")
                    }
                    fields[key] = try NumberGenerator.read(value)
                }
            }
            try object.finish()
            return .template(kind, fields: fields)
        }
        throw reader.fail("expected an object with \"hex\", \"utf8\", \"number\" or \"template\"")
    }
}
