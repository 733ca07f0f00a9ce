/// Standard base64 (RFC 4648 §4) without Foundation, for command values and published writes.
enum Base64 {
    static func decode(_ text: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        var padding = 0
        for scalar in text.unicodeScalars {
            let value: UInt32
            switch scalar {
            case "A"..."Z": value = scalar.value - 65
            case "a"..."z": value = scalar.value - 97 + 26
            case "0"..."9": value = scalar.value - 48 + 52
            case "+", "-": value = 62
            case "/", "_": value = 63
            case "=":
                padding += 1
                continue
            case " ", "\n", "\r": continue
            default: return nil
            }
            guard padding == 0 else { return nil }
            buffer = buffer << 6 | value
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        guard padding <= 2, bits < 6 else { return nil }
        return bytes
    }

    /// Padded standard base64 of `bytes`.
    static func encode(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var group: UInt32 = 0
            for (offset, byte) in chunk.enumerated() { group |= UInt32(byte) << (16 - 8 * UInt32(offset)) }
            for position in 0..<4 {
                out.append(
                    position <= chunk.count
                        ? alphabet[Int(group >> (18 - 6 * UInt32(position)) & 0x3F)] : UInt8(ascii: "="))
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
