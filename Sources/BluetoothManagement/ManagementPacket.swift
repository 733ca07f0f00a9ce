/// One packet of the Linux kernel's Bluetooth management protocol (the `HCI_CHANNEL_CONTROL`
/// socket that bluetoothd also uses; docs/architecture.md, "Layers"): a six-octet header — the
/// command or event code, the controller index and the parameter length, each a little-endian
/// `UInt16` — then the parameters. A command and an event have the same layout; the direction
/// tells them apart. One read of the socket returns exactly one packet.
public struct ManagementPacket: Sendable, Equatable {
    /// The controller index of a packet about no controller (e.g. Read Management Version).
    public static let noController: UInt16 = 0xFFFF
    /// The header's length in octets.
    public static let headerLength = 6
    /// The most parameter octets a packet can carry (the length field is 16 bits).
    public static let maximumParameterLength = Int(UInt16.max)

    /// The command code (to the kernel) or event code (from it).
    public var code: UInt16
    /// The controller index (`hciN` is N), or ``noController``.
    public var controller: UInt16
    /// The parameters after the header.
    public var parameters: [UInt8]

    public init(code: UInt16, controller: UInt16, parameters: [UInt8] = []) {
        self.code = code
        self.controller = controller
        self.parameters = parameters
    }

    /// The packet as written to the socket. Parameters beyond ``maximumParameterLength`` octets
    /// cannot be expressed and are left out.
    public var bytes: [UInt8] {
        let count = min(parameters.count, Self.maximumParameterLength)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.headerLength + count)
        bytes.appendLittleEndian(code)
        bytes.appendLittleEndian(controller)
        bytes.appendLittleEndian(UInt16(count))
        bytes += parameters.prefix(count)
        return bytes
    }

    /// One packet from one read of the socket: exactly the header and as many parameter octets as
    /// its length says, else an error.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(ManagementDecodeError) -> ManagementPacket {
        let parameters = try parameterBytes(bytes)
        return ManagementPacket(
            code: bytes.uint16(at: 0), controller: bytes.uint16(at: 2), parameters: Array(parameters))
    }

    /// ``decode(_:)-(UnsafeRawBufferPointer)`` of an array.
    public static func decode(_ bytes: [UInt8]) throws(ManagementDecodeError) -> ManagementPacket {
        // withUnsafeBytes rethrows untyped errors; a Result keeps the type.
        try bytes.withUnsafeBytes { buffer in Result { () throws(ManagementDecodeError) in try decode(buffer) } }.get()
    }

    /// The parameter octets of one whole packet in `bytes`, after checking its header.
    static func parameterBytes(_ bytes: UnsafeRawBufferPointer) throws(ManagementDecodeError) -> UnsafeRawBufferPointer
    {
        guard bytes.count >= headerLength else { throw .truncatedHeader(length: bytes.count) }
        let declared = Int(bytes.uint16(at: 4))
        guard bytes.count - headerLength == declared else {
            throw .lengthMismatch(declared: declared, actual: bytes.count - headerLength)
        }
        return UnsafeRawBufferPointer(rebasing: bytes[headerLength...])
    }
}

/// Why management bytes could not be decoded. Nothing from the socket traps: every malformed
/// packet or parameter block is one of these.
public enum ManagementDecodeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Fewer than the header's six octets.
    case truncatedHeader(length: Int)
    /// The header's parameter length differs from the octets that followed it.
    case lengthMismatch(declared: Int, actual: Int)
    /// An event's parameters are shorter than its fixed fields.
    case shortParameters(event: UInt16, expected: Int, actual: Int)
    /// A Device Found event's AD data length differs from the octets that followed it.
    case dataLengthMismatch(event: UInt16, declared: Int, actual: Int)
    /// A command's return parameters (in Command Complete) are shorter than their layout.
    case shortReturnParameters(command: UInt16, expected: Int, actual: Int)
    /// A command's parameters do not follow its layout (the simulator reads commands).
    case invalidCommandParameters(command: UInt16, reason: String)

    public var description: String {
        switch self {
        case .truncatedHeader(let length):
            "management packet of \(length) octets is shorter than its 6-octet header"
        case .lengthMismatch(let declared, let actual):
            "management packet declares \(declared) parameter octets but carries \(actual)"
        case .shortParameters(let event, let expected, let actual):
            "management event \(hex(event)) needs at least \(expected) parameter octets, got \(actual)"
        case .dataLengthMismatch(let event, let declared, let actual):
            "management event \(hex(event)) declares \(declared) octets of AD data but carries \(actual)"
        case .shortReturnParameters(let command, let expected, let actual):
            "return parameters of management command \(hex(command)) need \(expected) octets, got \(actual)"
        case .invalidCommandParameters(let command, let reason):
            "parameters of management command \(hex(command)): \(reason)"
        }
    }
}

func hex(_ value: UInt16) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return "0x" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}

extension UnsafeRawBufferPointer {
    @inline(__always)
    func uint16(at offset: Int) -> UInt16 {
        UInt16(self[offset]) | UInt16(self[offset + 1]) << 8
    }

    @inline(__always)
    func uint32(at offset: Int) -> UInt32 {
        UInt32(self[offset]) | UInt32(self[offset + 1]) << 8 | UInt32(self[offset + 2]) << 16
            | UInt32(self[offset + 3]) << 24
    }
}

extension Array where Element == UInt8 {
    mutating func appendLittleEndian(_ value: UInt16) {
        append(UInt8(truncatingIfNeeded: value))
        append(UInt8(truncatingIfNeeded: value >> 8))
    }

    mutating func appendLittleEndian(_ value: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }
}
