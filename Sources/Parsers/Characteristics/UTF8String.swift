import Bluetooth

/// Decodes a GSS `utf8s` value: not NUL-terminated, but trailing NUL padding is stripped.
func utf8String(_ value: [UInt8], what: String) throws(ParseError) -> String {
    var end = value.count
    while end > 0, value[end - 1] == 0 { end -= 1 }
    var text = ""
    var iterator = value[0..<end].makeIterator()
    var decoder = UTF8()
    loop: while true {
        switch decoder.decode(&iterator) {
        case .scalarValue(let scalar): text.unicodeScalars.append(scalar)
        case .emptyInput: break loop
        case .error: throw ParseError(.invalidUTF8, "\(what) is not valid UTF-8")
        }
    }
    return text
}
