internal import CDBus

#if canImport(Glibc)
    import Glibc
#endif

/// Decodes a message body from its D-Bus wire format (specification, "Marshaling (Wire
/// Format)"), as ``MessageDecoder``'s `DBusMessageIter` walk would, for a fraction of the cost.
///
/// libdbus's iterator works out each step from the type signature again: `dbus_message_iter_next`
/// over a dictionary entry walks the entry's value to find its end, some 800 instructions for
/// one `{sv}`, and a BlueZ `PropertiesChanged` took ~9,000 in iterator calls. Here the body
/// (copied out once with `dbus_message_marshal`) is read front to back, driven by the signature.
///
/// libdbus validated the message on receipt, so the body agrees with its signature; every read
/// is still bounds-checked, and anything unexpected ends the attempt (`nil`), leaving the
/// message to ``MessageDecoder``'s iterator walk, as it does for what this does not decode:
/// big-endian messages and messages carrying unix fds (`h`, duplicated by libdbus's iterator).
struct WireDecoder {
    /// The whole marshalled message: alignment is relative to its first byte.
    private let bytes: UnsafeRawBufferPointer
    private var offset: Int
    private let strings: StringCache?

    private struct Unexpected: Error {}

    /// The arguments of `message` (a `DBusMessage*`), or nil when it is left to the iterator.
    static func values(of message: OpaquePointer, strings: StringCache?) -> [DBusValue]? {
        guard let signature = dbus_message_get_signature(message), strchr(signature, Int32(Code.unixFD)) == nil
        else { return nil }
        var marshalled: UnsafeMutablePointer<CChar>? = nil
        var length: Int32 = 0
        guard dbus_message_marshal(message, &marshalled, &length) != 0, let marshalled else { return nil }
        defer { dbus_free(marshalled) }
        let bytes = UnsafeRawBufferPointer(start: marshalled, count: Int(length))
        // Fixed header: byte order, type, flags, version, body length, serial, then the header
        // fields array (its length, the fields); the body starts at the next multiple of 8.
        guard bytes.count >= 16, bytes[0] == UInt8(ascii: "l") else { return nil }
        let bodyLength = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
        let fieldsLength = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 12, as: UInt32.self)))
        let bodyStart = (16 + fieldsLength + 7) & ~7
        guard bodyStart <= bytes.count, bytes.count - bodyStart == bodyLength else { return nil }
        var decoder = WireDecoder(bytes: bytes, offset: bodyStart, strings: strings)
        var types = Signature(UnsafeRawBufferPointer(start: signature, count: strlen(signature)))
        var values: [DBusValue] = []
        values.reserveCapacity(MessageDecoder.argumentCount(signature))
        do {
            while !types.atEnd { values.append(try decoder.value(&types)) }
        } catch {
            return nil
        }
        return decoder.offset == bytes.count ? values : nil
    }

    // MARK: Values

    /// The value of the complete type at `types` (which moves past it).
    private mutating func value(_ types: inout Signature) throws -> DBusValue {
        let code = try types.next()
        switch code {
        case Code.byte: return .byte(try read(UInt8.self))
        case Code.boolean: return .boolean(try read(UInt32.self) != 0)
        case Code.int16: return .int16(Int16(bitPattern: try read(UInt16.self)))
        case Code.uint16: return .uint16(try read(UInt16.self))
        case Code.int32: return .int32(Int32(bitPattern: try read(UInt32.self)))
        case Code.uint32: return .uint32(try read(UInt32.self))
        case Code.int64: return .int64(Int64(bitPattern: try read(UInt64.self)))
        case Code.uint64: return .uint64(try read(UInt64.self))
        case Code.double: return .double(Double(bitPattern: try read(UInt64.self)))
        case Code.string: return .string(try string())
        case Code.objectPath: return .objectPath(DBusObjectPath(unchecked: try string()))
        case Code.signature: return .signature(try DBusSignature(String(decoding: try signature(), as: UTF8.self)))
        case Code.variant:
            var inner = Signature(try signature())
            let value = try value(&inner)
            guard inner.atEnd else { throw Unexpected() }
            return .variant(value)
        case Code.array: return try array(&types)
        case Code.structOpen:
            try align(8)
            var fields: [DBusValue] = []
            while try types.peek() != Code.structClose { fields.append(try value(&types)) }
            _ = try types.next()
            return .structure(fields)
        default:
            throw Unexpected()
        }
    }

    /// An array (`types` is past its `a`): its byte length, padding to its element alignment,
    /// its elements. The element type comes from the signature, like the iterator walk's.
    private mutating func array(_ types: inout Signature) throws -> DBusValue {
        let length = Int(try read(UInt32.self))
        let elementCode = try types.peek()
        try align(Self.alignment(of: elementCode))
        guard length <= bytes.count - offset else { throw Unexpected() }
        let end = offset + length
        let elementTypes = types
        if elementCode == Code.byte {
            _ = try types.next()
            let elements = UnsafeRawBufferPointer(rebasing: bytes[offset..<end])
            offset = end
            return .array(.byte, elements.map { .byte($0) })
        }
        if elementCode == Code.dictOpen {
            _ = try types.next()
            let keyTypes = types
            let keyType = try Self.type(&types)
            let valueTypes = types
            let valueType = try Self.type(&types)
            guard keyType.isBasic, try types.next() == Code.dictClose else { throw Unexpected() }
            var entries: [DBusDictionaryEntry] = []
            // A few entries are the rule (BlueZ's PropertiesChanged carries one to three).
            if offset < end { entries.reserveCapacity(4) }
            while offset < end {
                try align(8)
                var keyCursor = keyTypes
                let key = try value(&keyCursor)
                var valueCursor = valueTypes
                entries.append(DBusDictionaryEntry(key, try value(&valueCursor)))
            }
            guard offset == end else { throw Unexpected() }
            return .dictionary(key: keyType, value: valueType, entries)
        }
        let elementType = try Self.type(&types)
        var elements: [DBusValue] = []
        while offset < end {
            var cursor = elementTypes
            elements.append(try value(&cursor))
        }
        guard offset == end else { throw Unexpected() }
        return .array(elementType, elements)
    }

    /// An `s` or `o`: length, bytes, NUL. Long ones come from `strings` when given.
    private mutating func string() throws -> String {
        let length = Int(try read(UInt32.self))
        guard length < bytes.count - offset else { throw Unexpected() }
        let start = bytes.baseAddress! + offset
        offset += length + 1
        if let strings { return strings.string(start.assumingMemoryBound(to: CChar.self), count: length) }
        return String(decoding: UnsafeRawBufferPointer(start: start, count: length), as: UTF8.self)
    }

    /// A `g` (also a variant's type): one length byte, bytes, NUL.
    private mutating func signature() throws -> UnsafeRawBufferPointer {
        let length = Int(try read(UInt8.self))
        guard length < bytes.count - offset else { throw Unexpected() }
        let text = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)])
        offset += length + 1
        return text
    }

    /// A little-endian integer at the next multiple of its size.
    private mutating func read<T: FixedWidthInteger>(_: T.Type) throws -> T {
        try align(MemoryLayout<T>.size)
        guard MemoryLayout<T>.size <= bytes.count - offset else { throw Unexpected() }
        defer { offset += MemoryLayout<T>.size }
        return T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    private mutating func align(_ boundary: Int) throws {
        let aligned = (offset + boundary - 1) & ~(boundary - 1)
        guard aligned <= bytes.count else { throw Unexpected() }
        offset = aligned
    }

    // MARK: Types

    /// The complete type at `types` (which moves past it), as ``DBusSignature`` parses it.
    private static func type(_ types: inout Signature) throws -> DBusType {
        switch try types.next() {
        case Code.byte: return .byte
        case Code.boolean: return .boolean
        case Code.int16: return .int16
        case Code.uint16: return .uint16
        case Code.int32: return .int32
        case Code.uint32: return .uint32
        case Code.int64: return .int64
        case Code.uint64: return .uint64
        case Code.double: return .double
        case Code.string: return .string
        case Code.objectPath: return .objectPath
        case Code.signature: return .signature
        case Code.variant: return .variant
        case Code.unixFD: return .unixFD
        case Code.array:
            guard try types.peek() == Code.dictOpen else { return .array(try type(&types)) }
            _ = try types.next()
            let key = try type(&types)
            let value = try type(&types)
            guard try types.next() == Code.dictClose else { throw Unexpected() }
            return .dictionary(key: key, value: value)
        case Code.structOpen:
            var fields: [DBusType] = []
            while try types.peek() != Code.structClose { fields.append(try type(&types)) }
            _ = try types.next()
            return .structure(fields)
        default:
            throw Unexpected()
        }
    }

    /// The alignment of a value whose type starts with `code`.
    private static func alignment(of code: UInt8) -> Int {
        switch code {
        case Code.byte, Code.signature, Code.variant: 1
        case Code.int16, Code.uint16: 2
        case Code.int64, Code.uint64, Code.double, Code.structOpen, Code.dictOpen: 8
        default: 4  // b i u h s o a
        }
    }

    /// A position in a signature (the body's, an array's element type, a variant's type).
    private struct Signature {
        let codes: UnsafeRawBufferPointer
        var index = 0

        init(_ codes: UnsafeRawBufferPointer) { self.codes = codes }

        var atEnd: Bool { index >= codes.count }

        func peek() throws -> UInt8 {
            guard index < codes.count else { throw Unexpected() }
            return codes[index]
        }

        mutating func next() throws -> UInt8 {
            defer { index += 1 }
            return try peek()
        }
    }

    /// D-Bus type codes as bytes (`DBUS_TYPE_*`).
    private enum Code {
        static let byte = UInt8(ascii: "y")
        static let boolean = UInt8(ascii: "b")
        static let int16 = UInt8(ascii: "n")
        static let uint16 = UInt8(ascii: "q")
        static let int32 = UInt8(ascii: "i")
        static let uint32 = UInt8(ascii: "u")
        static let int64 = UInt8(ascii: "x")
        static let uint64 = UInt8(ascii: "t")
        static let double = UInt8(ascii: "d")
        static let string = UInt8(ascii: "s")
        static let objectPath = UInt8(ascii: "o")
        static let signature = UInt8(ascii: "g")
        static let unixFD = UInt8(ascii: "h")
        static let variant = UInt8(ascii: "v")
        static let array = UInt8(ascii: "a")
        static let structOpen = UInt8(ascii: "(")
        static let structClose = UInt8(ascii: ")")
        static let dictOpen = UInt8(ascii: "{")
        static let dictClose = UInt8(ascii: "}")
    }
}
