import Bluetooth
import JSON

extension ValueEncoding {
    /// The JSON value `bytes` stand for in this encoding — the inverse of ``encode(_:minimum:maximum:)``,
    /// used where BLE writes are published to MQTT. nil when the bytes do not fit the encoding
    /// (a wrong length, invalid UTF-8 or JSON); the caller then publishes the raw bytes only.
    public func decode(_ bytes: [UInt8]) -> JSONValue? {
        if let layout = integerLayout {
            guard bytes.count == layout.size else { return nil }
            let ordered = layout.bigEndian ? bytes.reversed() : bytes
            var bits: UInt64 = 0
            for (index, byte) in ordered.enumerated() { bits |= UInt64(byte) << (8 * UInt64(index)) }
            if layout.signed {
                let shift = UInt64(64 - layout.size * 8)
                return .number(Double(Int64(bitPattern: bits << shift) >> Int64(shift)))
            }
            return .number(Double(bits))
        }
        switch self {
        case .float32le:
            guard bytes.count == 4 else { return nil }
            let bits = bytes.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
            let number = Double(Float(bitPattern: bits))
            return number.isFinite ? .number(number) : nil
        case .bool:
            guard bytes.count == 1, bytes[0] <= 1 else { return nil }
            return .bool(bytes[0] == 1)
        case .hex:
            return .string(Hex.encode(bytes))
        case .base64:
            return .string(Base64.encode(bytes))
        case .utf8:
            return String(validating: bytes, as: UTF8.self).map(JSONValue.string)
        case .json:
            return try? JSONValue.parse(bytes)
        default:
            return nil
        }
    }
}
