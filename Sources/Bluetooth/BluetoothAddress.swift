/// A 48-bit Bluetooth device address (BD_ADDR), as BlueZ writes it: `A4:C1:38:0B:12:34`.
///
/// The octets are kept in the order they are written (most significant first), which is the
/// reverse of the order they travel on air. Parsing accepts upper- or lower-case hex with `:` or
/// `-` separators; ``description`` is always upper case with colons, like BlueZ object paths.
public struct BluetoothAddress: Sendable, Hashable, Comparable, CustomStringConvertible, LosslessStringConvertible {
    /// The 48-bit value; octet 0 of ``octets`` is bits 47-40.
    public let rawValue: UInt64

    /// Who assigned the address (Core spec Vol 6 Part B 1.3).
    public enum AddressType: String, Sendable, Hashable, CaseIterable {
        /// An IEEE-assigned public address.
        case `public`
        /// A random address (static, resolvable private or non-resolvable private).
        case random
    }

    /// Creates an address from the low 48 bits of `rawValue`.
    @inlinable
    public init(rawValue: UInt64) {
        self.rawValue = rawValue & 0xFFFF_FFFF_FFFF
    }

    /// Creates an address from six octets in written order (`A4:C1:…` → `[0xA4, 0xC1, …]`);
    /// nil unless there are exactly six.
    /// Inlinable so callers in other modules get it specialised for their collection (an
    /// unspecialised generic call cost ~3,000 instructions per advertisement that carries a MAC).
    @inlinable
    public init?<C: Collection>(octets: C) where C.Element == UInt8 {
        guard octets.count == 6 else { return nil }
        var value: UInt64 = 0
        for octet in octets { value = value << 8 | UInt64(octet) }
        self.rawValue = value
    }

    /// Creates an address from six octets in on-air order (least significant first), as found
    /// inside many advertisement payloads.
    @inlinable
    public init?<C: Collection>(littleEndianOctets octets: C) where C.Element == UInt8 {
        guard octets.count == 6 else { return nil }
        var value: UInt64 = 0
        for octet in octets.reversed() { value = value << 8 | UInt64(octet) }
        self.rawValue = value
    }

    /// Parses `A4:C1:38:0B:12:34` (also with `-` separators or none, any case); nil otherwise.
    public init?(_ description: String) {
        var value: UInt64 = 0
        var digits = 0
        var sinceSeparator = 0
        for scalar in description.unicodeScalars {
            if scalar == ":" || scalar == "-" {
                guard sinceSeparator == 2 else { return nil }
                sinceSeparator = 0
                continue
            }
            guard let nibble = Hex.value(scalar) else { return nil }
            value = value << 4 | UInt64(nibble)
            digits += 1
            sinceSeparator += 1
            guard digits <= 12 else { return nil }
        }
        guard digits == 12, sinceSeparator == 2 || (sinceSeparator == 12) else { return nil }
        self.rawValue = value
    }

    /// The six octets in written order.
    public var octets: [UInt8] {
        (0..<6).map { UInt8(truncatingIfNeeded: rawValue >> (40 - 8 * UInt64($0))) }
    }

    /// Upper-case, colon-separated: `A4:C1:38:0B:12:34`.
    public var description: String {
        // Written straight into the string's storage: no digit table or byte array per call.
        String(unsafeUninitializedCapacity: 17) { buffer in
            var position = 0
            for index in 0..<6 {
                let octet = UInt8(truncatingIfNeeded: rawValue >> (40 - 8 * UInt64(index)))
                if index > 0 {
                    buffer[position] = UInt8(ascii: ":")
                    position += 1
                }
                buffer[position] = Hex.digit(octet >> 4, uppercase: true)
                buffer[position + 1] = Hex.digit(octet & 0xF, uppercase: true)
                position += 2
            }
            return position
        }
    }

    /// The address as the path component BlueZ uses: `dev_A4_C1_38_0B_12_34`.
    public var bluezPathComponent: String {
        "dev_" + description.replacingColons()
    }

    /// True for a random static address (two top bits 11), which stays fixed while powered.
    public var isStaticRandom: Bool { rawValue >> 46 == 0b11 }

    public static func < (lhs: BluetoothAddress, rhs: BluetoothAddress) -> Bool { lhs.rawValue < rhs.rawValue }
}

extension String {
    fileprivate func replacingColons() -> String {
        String(self.map { $0 == ":" ? "_" : $0 })
    }
}
