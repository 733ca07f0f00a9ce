import Bluetooth

/// IEEE 11073-20601 medical floats as GATT carries them (GSS `medfloat16` / `medfloat32`).
///
/// SFLOAT: 4-bit two's-complement exponent, 12-bit two's-complement mantissa. FLOAT: 8-bit
/// exponent, 24-bit mantissa. Value = mantissa × 10^exponent. The special values (NaN, NRes,
/// ±INFINITY, reserved) are whole raw words with exponent 0 and are tested before sign extension.
public enum IEEE11073 {
    /// A decoded medical float: a number or one of the special values.
    public enum Value: Sendable, Hashable {
        case number(Double)
        case special(Special)
    }

    /// The special values; ``rawValue`` is the tag published next to a `null` reading.
    public enum Special: String, Sendable, Hashable {
        case nan = "NaN"
        case nres = "NRes"
        case positiveInfinity = "+INF"
        case negativeInfinity = "-INF"
        case reserved
    }

    /// Decodes a 16-bit SFLOAT raw word (already assembled from its two LE bytes).
    public static func sfloat(_ raw: UInt16) -> Value {
        switch raw {
        case 0x07FF: return .special(.nan)
        case 0x0800: return .special(.nres)
        case 0x07FE: return .special(.positiveInfinity)
        case 0x0802: return .special(.negativeInfinity)
        case 0x0801: return .special(.reserved)
        default: break
        }
        let exponent = Int(signExtend(UInt64(raw >> 12), bits: 4))
        let mantissa = signExtend(UInt64(raw & 0x0FFF), bits: 12)
        return .number(scale(mantissa, exponent))
    }

    /// Decodes a 32-bit FLOAT raw word (already assembled from its four LE bytes).
    public static func float(_ raw: UInt32) -> Value {
        switch raw {
        case 0x007F_FFFF: return .special(.nan)
        case 0x0080_0000: return .special(.nres)
        case 0x007F_FFFE: return .special(.positiveInfinity)
        case 0x0080_0002: return .special(.negativeInfinity)
        case 0x0080_0001: return .special(.reserved)
        default: break
        }
        let exponent = Int(Int8(truncatingIfNeeded: raw >> 24))
        let mantissa = signExtend(UInt64(raw & 0x00FF_FFFF), bits: 24)
        return .number(scale(mantissa, exponent))
    }

    /// mantissa × 10^exponent, dividing for negative exponents so 160 × 10^-1 is exactly 16.0.
    static func scale(_ mantissa: Int64, _ exponent: Int) -> Double {
        if exponent >= 0 {
            var value = Double(mantissa)
            for _ in 0..<exponent { value *= 10 }
            return value
        }
        var divisor = 1.0
        for _ in 0..<(-exponent) { divisor *= 10 }
        return Double(mantissa) / divisor
    }
}

extension ByteReader {
    /// Reads a little-endian SFLOAT.
    public mutating func sfloat() throws(ParseError) -> IEEE11073.Value { IEEE11073.sfloat(try u16le()) }
    /// Reads a little-endian FLOAT.
    public mutating func medfloat() throws(ParseError) -> IEEE11073.Value { IEEE11073.float(try u32le()) }
}

extension Array where Element == Reading {
    /// Appends a medical float as `name` (null for a special) plus `name_special` for specials.
    mutating func append(_ name: String, _ value: IEEE11073.Value, unit: ReadingUnit?, deviceClass: DeviceClass? = nil)
    {
        switch value {
        case .number(let number):
            append(Reading(name: name, value: .number(number), unit: unit, deviceClass: deviceClass))
        case .special(let special):
            append(Reading(name: name, value: .null, unit: unit, deviceClass: deviceClass))
            append(Reading(name: name + "_special", value: .string(special.rawValue)))
        }
    }
}
