/// The properties of a GATT characteristic: the eight bits of the characteristic declaration
/// (Core spec Vol 3 Part G 3.3.1.1) plus the extra flags BlueZ reports in
/// `org.bluez.GattCharacteristic1.Flags` (`"read"`, `"write-without-response"`, `"notify"`, …).
public struct CharacteristicProperties: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let broadcast = Self(rawValue: 1 << 0)
    public static let read = Self(rawValue: 1 << 1)
    public static let writeWithoutResponse = Self(rawValue: 1 << 2)
    public static let write = Self(rawValue: 1 << 3)
    public static let notify = Self(rawValue: 1 << 4)
    public static let indicate = Self(rawValue: 1 << 5)
    public static let authenticatedSignedWrites = Self(rawValue: 1 << 6)
    public static let extendedProperties = Self(rawValue: 1 << 7)
    // BlueZ-only flags (extended properties and security requirements).
    public static let reliableWrite = Self(rawValue: 1 << 8)
    public static let writableAuxiliaries = Self(rawValue: 1 << 9)
    public static let encryptRead = Self(rawValue: 1 << 10)
    public static let encryptWrite = Self(rawValue: 1 << 11)
    public static let encryptNotify = Self(rawValue: 1 << 12)
    public static let encryptIndicate = Self(rawValue: 1 << 13)
    public static let encryptAuthenticatedRead = Self(rawValue: 1 << 14)
    public static let encryptAuthenticatedWrite = Self(rawValue: 1 << 15)
    public static let encryptAuthenticatedNotify = Self(rawValue: 1 << 16)
    public static let encryptAuthenticatedIndicate = Self(rawValue: 1 << 17)
    public static let secureRead = Self(rawValue: 1 << 18)
    public static let secureWrite = Self(rawValue: 1 << 19)
    public static let secureNotify = Self(rawValue: 1 << 20)
    public static let secureIndicate = Self(rawValue: 1 << 21)
    public static let authorize = Self(rawValue: 1 << 22)

    /// Each property with the flag string BlueZ uses for it, in bit order.
    public static let bluezFlags: [(property: CharacteristicProperties, flag: String)] = [
        (.broadcast, "broadcast"), (.read, "read"), (.writeWithoutResponse, "write-without-response"),
        (.write, "write"), (.notify, "notify"), (.indicate, "indicate"),
        (.authenticatedSignedWrites, "authenticated-signed-writes"), (.extendedProperties, "extended-properties"),
        (.reliableWrite, "reliable-write"), (.writableAuxiliaries, "writable-auxiliaries"),
        (.encryptRead, "encrypt-read"), (.encryptWrite, "encrypt-write"), (.encryptNotify, "encrypt-notify"),
        (.encryptIndicate, "encrypt-indicate"), (.encryptAuthenticatedRead, "encrypt-authenticated-read"),
        (.encryptAuthenticatedWrite, "encrypt-authenticated-write"),
        (.encryptAuthenticatedNotify, "encrypt-authenticated-notify"),
        (.encryptAuthenticatedIndicate, "encrypt-authenticated-indicate"), (.secureRead, "secure-read"),
        (.secureWrite, "secure-write"), (.secureNotify, "secure-notify"), (.secureIndicate, "secure-indicate"),
        (.authorize, "authorize"),
    ]

    /// Builds the set from BlueZ flag strings; unknown flags are returned in `unknown` rather than
    /// dropped silently, so a newer BlueZ can be logged.
    public init(bluezFlags flags: [String], unknown: inout [String]) {
        var result: CharacteristicProperties = []
        for flag in flags {
            if let match = Self.bluezFlags.first(where: { $0.flag == flag }) {
                result.insert(match.property)
            } else {
                unknown.append(flag)
            }
        }
        self = result
    }

    /// Builds the set from BlueZ flag strings, ignoring flags this version does not know.
    public init(bluezFlags flags: [String]) {
        var ignored: [String] = []
        self.init(bluezFlags: flags, unknown: &ignored)
    }

    /// The BlueZ flag strings, in bit order.
    public var bluezFlags: [String] {
        Self.bluezFlags.filter { contains($0.property) }.map(\.flag)
    }

    /// The flags joined with commas: `read,notify`.
    public var description: String { bluezFlags.joined(separator: ",") }
}
