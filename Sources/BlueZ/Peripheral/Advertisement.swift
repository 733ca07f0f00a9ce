import Bluetooth
import DBus

/// What a ``PeripheralManager`` advertises (`org.bluez.LEAdvertisement1`), in the legacy
/// advertising payload of at most 31 bytes (no scan response, no extended advertising).
///
/// Core Bluetooth only lets an app advertise a local name and service UUIDs; BlueZ allows the
/// other fields too, so a Linux peripheral can also act as a beacon.
public struct Advertisement: Sendable, Hashable {
    /// Connectable (`"peripheral"`, discoverable, centrals may connect) or `"broadcast"`
    /// (non-connectable, no discoverable flags: a beacon).
    public enum Kind: String, Sendable, Hashable {
        case connectable = "peripheral"
        case broadcast
    }

    public var kind: Kind
    /// The Complete Local Name.
    public var localName: String?
    public var serviceUUIDs: [BluetoothUUID]
    /// Manufacturer-specific data by company id (the id is not part of the bytes).
    public var manufacturerData: [UInt16: [UInt8]]
    /// Service data by UUID (the UUID is not part of the bytes).
    public var serviceData: [BluetoothUUID: [UInt8]]
    /// Advertise the TX power level and ask the controller for this power in dBm (`TxPower`,
    /// `Includes: ["tx-power"]`).
    public var txPower: Int8?
    /// The GAP Appearance value (e.g. 0x0340 generic sensor).
    public var appearance: UInt16?
    /// Services this device would like a central to offer (`SolicitUUIDs`; AD types 0x14, 0x1F,
    /// 0x15; Core Bluetooth's `CBAdvertisementDataSolicitedServiceUUIDsKey`): a central that has
    /// them can connect and serve them, e.g. a watch soliciting a phone's notification service.
    public var solicitUUIDs: [BluetoothUUID]
    /// The secondary advertising channel ("1M", "2M", "Coded") for extended advertising
    /// (`SecondaryChannel`; up to ``extendedLimit`` bytes); nil: legacy advertising (31 bytes).
    /// ``PeripheralManager`` sets "1M" by itself when the data does not fit the legacy payload
    /// and the adapter supports extended advertising.
    public var secondaryChannel: String?

    public init(
        kind: Kind = .connectable, localName: String? = nil, serviceUUIDs: [BluetoothUUID] = [],
        manufacturerData: [UInt16: [UInt8]] = [:], serviceData: [BluetoothUUID: [UInt8]] = [:],
        txPower: Int8? = nil, appearance: UInt16? = nil, solicitUUIDs: [BluetoothUUID] = []
    ) {
        self.kind = kind
        self.localName = localName
        self.solicitUUIDs = solicitUUIDs
        self.serviceUUIDs = serviceUUIDs
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
        self.txPower = txPower
        self.appearance = appearance
    }

    /// The legacy advertising limit (Core spec Vol 6 Part B 2.3.1: AdvData is 0…31 octets).
    public static let legacyLimit = 31
    /// The extended advertising data bluetoothd 5.66 sends in one HCI command (251 octets).
    public static let extendedLimit = 251

    /// The limit that applies: ``extendedLimit`` with a ``secondaryChannel``, else ``legacyLimit``.
    public var payloadLimit: Int { secondaryChannel == nil ? Self.legacyLimit : Self.extendedLimit }

    /// One AD structure of the payload: what it carries and its length on air (length byte, type
    /// byte and data).
    public struct Field: Sendable, Hashable, CustomStringConvertible {
        public var name: String
        public var bytes: Int
        /// Whether leaving it out is a sensible fix (the flags are not the user's to drop).
        public var optional: Bool
        public var description: String { "\(name) \(bytes)" }
    }

    /// The AD structures bluetoothd (and the kernel) put into the advertising data, in order.
    /// Counted conservatively: the 3-byte Flags field for a connectable advertisement, the name
    /// complete (BlueZ would shorten an oversized name instead of failing; we report it).
    public var legacyFields: [Field] {
        var fields: [Field] = []
        if kind == .connectable { fields.append(Field(name: "flags", bytes: 3, optional: false)) }
        let widths: [(BluetoothUUID.Width, Int, String)] = [
            (.bits16, 2, "16-bit"), (.bits32, 4, "32-bit"), (.bits128, 16, "128-bit"),
        ]
        // bluetoothd writes the service UUIDs, then the solicited ones, one AD structure per width.
        for (list, what) in [(serviceUUIDs, "service"), (solicitUUIDs, "solicited")] {
            for (width, size, label) in widths {
                let count = list.filter { Self.onAirWidth($0) == width }.count
                if count > 0 {
                    fields.append(
                        Field(name: "\(label) \(what) UUIDs (\(count))", bytes: 2 + size * count, optional: true))
                }
            }
        }
        for (company, bytes) in manufacturerData.sorted(by: { $0.key < $1.key }) {
            fields.append(
                Field(
                    name: "manufacturer data 0x\(String(company, radix: 16).leftPadded(to: 4))", bytes: 4 + bytes.count,
                    optional: true))
        }
        for (uuid, bytes) in serviceData.sorted(by: { $0.key < $1.key }) {
            let size = Self.onAirWidth(uuid) == .bits16 ? 2 : Self.onAirWidth(uuid) == .bits32 ? 4 : 16
            fields.append(
                Field(name: "service data \(uuid.shortDescription)", bytes: 2 + size + bytes.count, optional: true))
        }
        if let localName {
            fields.append(Field(name: "local name \"\(localName)\"", bytes: 2 + localName.utf8.count, optional: true))
        }
        if appearance != nil { fields.append(Field(name: "appearance", bytes: 4, optional: true)) }
        if txPower != nil { fields.append(Field(name: "tx power", bytes: 3, optional: true)) }
        return fields
    }

    /// The advertising data length on air, in bytes.
    public var legacyPayloadLength: Int { legacyFields.reduce(0) { $0 + $1.bytes } }

    /// Checks the 31-byte limit.
    /// - Throws: ``PeripheralError`` ``PeripheralError/Code/advertisementTooLarge`` naming the
    ///   size, every field and what to drop, e.g. "advertisement needs 36 bytes, legacy limit is
    ///   31 (flags 3, 128-bit service UUIDs (1) 18, local name "Kitchen sensor" 16): 5 bytes too
    ///   many: shorten or drop the local name or drop a service UUID".
    public func checkLegacyLength(operation: String = "advertise") throws {
        try checkLength(limit: Self.legacyLimit, operation: operation)
    }

    /// Checks the limit that applies (``payloadLimit``: legacy, or extended with a
    /// ``secondaryChannel``), as ``checkLegacyLength(operation:)`` does; `note` is appended to
    /// the message.
    public func checkLength(operation: String = "advertise", note: String = "") throws {
        try checkLength(limit: payloadLimit, operation: operation, note: note)
    }

    private func checkLength(limit: Int, operation: String, note: String = "") throws {
        let fields = legacyFields
        let total = fields.reduce(0) { $0 + $1.bytes }
        guard total > limit else { return }
        let excess = total - limit
        var hints: [String] = []
        if let localName, localName.utf8.count > excess { hints.append("shorten the local name by \(excess) bytes") }
        for field in fields.filter(\.optional).sorted(by: { $0.bytes > $1.bytes }) where field.bytes >= excess {
            hints.append("drop the \(field.name)")
        }
        if hints.isEmpty { hints.append("drop several fields") }
        let list = fields.map(\.description).joined(separator: ", ")
        throw PeripheralError(
            .advertisementTooLarge, operation: operation,
            message:
                "advertisement needs \(total) bytes, \(limit == Self.legacyLimit ? "legacy" : "extended") limit is \(limit) (\(list)): \(excess) bytes too many: "
                + hints.prefix(3).joined(separator: " or ") + note)
    }

    /// How the UUID is written on air: 16-bit and 32-bit SIG UUIDs shortened, others 128-bit.
    static func onAirWidth(_ uuid: BluetoothUUID) -> BluetoothUUID.Width { uuid.width }

    /// The `LEAdvertisement1` properties (docs/bluez.md §5.3), in a stable order.
    var bluezProperties: [(String, DBusValue?)] {
        [
            ("Type", .string(kind.rawValue)),
            ("ServiceUUIDs", Self.uuidList(serviceUUIDs)),
            ("SolicitUUIDs", Self.uuidList(solicitUUIDs)),
            ("SecondaryChannel", secondaryChannel.map { .string($0) }),
            ("ManufacturerData", Self.dataDictionary(manufacturerData, key: .uint16) { .uint16($0) }),
            ("ServiceData", Self.dataDictionary(serviceData, key: .string) { .string($0.description.lowercased()) }),
            ("LocalName", localName.map { .string($0) }),
            ("Appearance", appearance.map { .uint16($0) }),
            ("TxPower", txPower.map { .int16(Int16($0)) }),
            ("Includes", txPower == nil ? nil : .strings(["tx-power"])),
        ]
    }

    /// A UUID list property (`as`, lower case as BlueZ spells them); nil when empty (not sent).
    private static func uuidList(_ uuids: [BluetoothUUID]) -> DBusValue? {
        uuids.isEmpty ? nil : .strings(uuids.map { $0.description.lowercased() })
    }

    /// A data dictionary property (`a{qv}` or `a{sv}`, each value a variant of bytes), sorted by
    /// key; nil when empty (not sent).
    private static func dataDictionary<Key: Comparable>(
        _ data: [Key: [UInt8]], key type: DBusType, _ key: (Key) -> DBusValue
    ) -> DBusValue? {
        data.isEmpty
            ? nil
            : .dictionary(
                key: type, value: .variant,
                data.sorted { $0.key < $1.key }.map { DBusDictionaryEntry(key($0.key), .variant(.bytes($0.value))) })
    }

    static let propertyTypes: [(String, DBusType)] = [
        ("Type", .string), ("ServiceUUIDs", .array(.string)), ("SolicitUUIDs", .array(.string)),
        ("SecondaryChannel", .string),
        ("ManufacturerData", .dictionary(key: .uint16, value: .variant)),
        ("ServiceData", .dictionary(key: .string, value: .variant)), ("LocalName", .string), ("Appearance", .uint16),
        ("TxPower", .int16), ("Includes", .array(.string)),
    ]
}
