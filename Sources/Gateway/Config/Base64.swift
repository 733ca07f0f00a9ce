/// Standard base64 (RFC 4648 §4) decoding without Foundation, for command values.
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
}
