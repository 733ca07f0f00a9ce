/// A Bluetooth UUID in any of its three sizes (Core spec Vol 3 Part B 2.5.1).
///
/// 16- and 32-bit UUIDs are shorthands for 128-bit UUIDs built on the SIG base
/// `0000xxxx-0000-1000-8000-00805f9b34fb`; this type stores the full 128-bit value, so `180F`,
/// `0000180F` and `0000180f-0000-1000-8000-00805f9b34fb` are equal and hash alike.
/// ``description`` is the lowercase 128-bit form BlueZ prints on D-Bus; ``shortDescription`` is
/// the 4- or 8-digit upper-case form for SIG-based UUIDs.
public struct BluetoothUUID: Sendable, Hashable, Comparable, CustomStringConvertible, LosslessStringConvertible {
    /// Bits 127-64.
    public let high: UInt64
    /// Bits 63-0.
    public let low: UInt64

    static let baseHigh: UInt64 = 0x0000_0000_0000_1000
    static let baseLow: UInt64 = 0x8000_0080_5F9B_34FB

    /// The width a UUID can be written in.
    public enum Width: Int, Sendable, Hashable {
        case bits16 = 16, bits32 = 32, bits128 = 128
    }

    /// Creates a UUID from its two 64-bit halves.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A SIG-assigned 16-bit UUID such as `0x180F` (Battery Service).
    public init(_ value: UInt16) {
        self.init(high: UInt64(value) << 32 | Self.baseHigh, low: Self.baseLow)
    }

    /// A SIG-assigned 32-bit UUID.
    public init(bits32 value: UInt32) {
        self.init(high: UInt64(value) << 32 | Self.baseHigh, low: Self.baseLow)
    }

    /// Creates a UUID from 16 octets in written (big-endian) order; nil unless there are 16.
    public init?<C: Collection>(octets: C) where C.Element == UInt8 {
        guard octets.count == 16 else { return nil }
        self.init(bytes: Array(octets), at: 0)
    }

    /// Reads 16 octets in written order starting at `offset`; nil when fewer remain.
    public init?(bytes: [UInt8], at offset: Int) {
        guard offset >= 0, bytes.count - offset >= 16 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for index in offset..<(offset + 8) { high = high << 8 | UInt64(bytes[index]) }
        for index in (offset + 8)..<(offset + 16) { low = low << 8 | UInt64(bytes[index]) }
        self.init(high: high, low: low)
    }

    /// Parses `180F`, `0000180F` or `0000180f-0000-1000-8000-00805f9b34fb` (any case, with or
    /// without hyphens in the 128-bit form); nil otherwise.
    public init?(_ description: String) {
        var high: UInt64 = 0
        var low: UInt64 = 0
        var digits = 0
        // Counted, not collected: BlueZ hands over a 36-character UUID string for every UUID and
        // service-data key of every advertisement, so parsing allocates nothing.
        var hyphens = 0
        var hyphensStandard = true  // each at 8, 12, 16, 20 digits so far
        for scalar in description.unicodeScalars {
            if scalar == "-" {
                if hyphens >= 4 || digits != 8 + 4 * hyphens { hyphensStandard = false }
                hyphens += 1
                continue
            }
            guard let nibble = Hex.value(scalar), digits < 32 else { return nil }
            if digits < 16 { high = high << 4 | UInt64(nibble) } else { low = low << 4 | UInt64(nibble) }
            digits += 1
        }
        switch digits {
        case 4, 8:
            guard hyphens == 0 else { return nil }
            self.init(high: high << 32 | Self.baseHigh, low: Self.baseLow)
        case 32:
            guard hyphens == 0 || (hyphens == 4 && hyphensStandard) else { return nil }
            self.init(high: high, low: low)
        default:
            return nil
        }
    }

    /// True when the UUID is built on the SIG base (so it has a 16- or 32-bit form).
    public var isSIGBased: Bool { low == Self.baseLow && high & 0xFFFF_FFFF == Self.baseHigh }

    /// The shortest width this UUID can be written in.
    public var width: Width {
        guard isSIGBased else { return .bits128 }
        return high >> 48 == 0 ? .bits16 : .bits32
    }

    /// The 16-bit value when the UUID is a SIG 16-bit UUID, else nil.
    public var uint16: UInt16? { width == .bits16 ? UInt16(truncatingIfNeeded: high >> 32) : nil }

    /// The 32-bit value when the UUID is SIG-based, else nil.
    public var uint32: UInt32? { isSIGBased ? UInt32(truncatingIfNeeded: high >> 32) : nil }

    /// The 16 octets in written (big-endian) order.
    public var octets: [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64($0))) }
            + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64($0))) }
    }

    /// The lowercase 128-bit form BlueZ uses: `0000180f-0000-1000-8000-00805f9b34fb`.
    public var description: String {
        String(unsafeUninitializedCapacity: 36) { buffer in
            var position = 0
            for index in 0..<32 {
                if index == 8 || index == 12 || index == 16 || index == 20 {
                    buffer[position] = UInt8(ascii: "-")
                    position += 1
                }
                let word = index < 16 ? high : low
                buffer[position] = Hex.digit(UInt8(truncatingIfNeeded: word >> UInt64(60 - 4 * (index % 16))) & 0xF)
                position += 1
            }
            return position
        }
    }

    /// `180F` for SIG 16-bit UUIDs, `0000FEAA`-style 8 digits for 32-bit ones, else ``description``.
    public var shortDescription: String {
        switch width {
        case .bits16: Hex.encode(high >> 32, digits: 4, uppercase: true)
        case .bits32: Hex.encode(high >> 32, digits: 8, uppercase: true)
        case .bits128: description
        }
    }

    public static func < (lhs: BluetoothUUID, rhs: BluetoothUUID) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }
}
