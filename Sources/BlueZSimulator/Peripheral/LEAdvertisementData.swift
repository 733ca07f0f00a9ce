import Bluetooth
import DBus

/// An application's `org.bluez.LEAdvertisement1` properties as bluetoothd 5.66 parses them
/// (`src/advertising.c`), and the legacy advertising payload they make.
public struct LEAdvertisementData: Sendable, Equatable {
    /// "peripheral" (connectable) or "broadcast".
    public var connectable: Bool
    public var serviceUUIDs: [BluetoothUUID] = []
    public var solicitUUIDs: [BluetoothUUID] = []
    public var manufacturerData: [(companyID: UInt16, bytes: [UInt8])] = []
    public var serviceData: [(uuid: BluetoothUUID, bytes: [UInt8])] = []
    public var data: [(type: UInt8, bytes: [UInt8])] = []
    /// Supported `Includes` entries ("tx-power", "appearance", "local-name"); others dropped.
    public var includes: [String] = []
    public var localName: String?
    public var appearance: UInt16?
    public var discoverable: Bool?
    public var timeout: UInt16?
    public var txPower: Int16?
    /// `SecondaryChannel`: extended advertising on this secondary PHY; nil: legacy.
    public var secondaryChannel: String?

    /// The `Includes` values bluetoothd 5.66 supports (`SupportedIncludes`).
    public static let supportedIncludes = ["tx-power", "appearance", "local-name"]
    /// The legacy advertising data limit.
    public static let maximumLength = 31
    /// Extended advertising data bluetoothd sends in one command.
    public static let extendedMaximumLength = 251

    /// The refusal bluetoothd sends for bad properties and for data that does not fit.
    public static let parseError = BlueZError.failed("Failed to parse advertisement.")

    public static func == (lhs: LEAdvertisementData, rhs: LEAdvertisementData) -> Bool {
        lhs.connectable == rhs.connectable && lhs.serviceUUIDs == rhs.serviceUUIDs
            && lhs.solicitUUIDs == rhs.solicitUUIDs
            && lhs.manufacturerData.map(\.companyID) == rhs.manufacturerData.map(\.companyID)
            && lhs.manufacturerData.map(\.bytes) == rhs.manufacturerData.map(\.bytes)
            && lhs.serviceData.map(\.uuid) == rhs.serviceData.map(\.uuid)
            && lhs.serviceData.map(\.bytes) == rhs.serviceData.map(\.bytes)
            && lhs.data.map(\.type) == rhs.data.map(\.type) && lhs.data.map(\.bytes) == rhs.data.map(\.bytes)
            && lhs.includes == rhs.includes && lhs.localName == rhs.localName && lhs.appearance == rhs.appearance
            && lhs.discoverable == rhs.discoverable && lhs.timeout == rhs.timeout && lhs.txPower == rhs.txPower
            && lhs.secondaryChannel == rhs.secondaryChannel
    }

    /// Parses a `GetAll(org.bluez.LEAdvertisement1)` reply. Unknown properties are ignored.
    /// - Throws: a description of the first problem (bluetoothd answers ``parseError``).
    public init(properties: [String: DBusValue]) throws(AdvertisementProblem) {
        func wrongType(_ name: String, _ expected: String) -> AdvertisementProblem {
            AdvertisementProblem("\(name) must be \(expected)")
        }
        guard let type = properties["Type"] else { throw AdvertisementProblem("Type is required") }
        switch type.string {
        case "peripheral": connectable = true
        case "broadcast": connectable = false
        default: throw AdvertisementProblem("Type must be \"peripheral\" or \"broadcast\", got \(type)")
        }
        func uuids(_ name: String) throws(AdvertisementProblem) -> [BluetoothUUID] {
            guard let value = properties[name] else { return [] }
            guard let strings = value.strings else { throw wrongType(name, "as") }
            var result: [BluetoothUUID] = []
            for text in strings {
                guard let uuid = BluetoothUUID(text) else {
                    throw AdvertisementProblem("\(name): \"\(text)\" is not a UUID")
                }
                result.append(uuid)
            }
            return result
        }
        serviceUUIDs = try uuids("ServiceUUIDs")
        solicitUUIDs = try uuids("SolicitUUIDs")
        if let value = properties["ManufacturerData"] {
            guard case .dictionary(.uint16, _, let entries) = value.unwrapped else {
                throw wrongType("ManufacturerData", "a{qv}")
            }
            for entry in entries {
                guard let id = entry.key.uint16, let bytes = entry.value.bytes else {
                    throw wrongType("ManufacturerData", "a{qv} of ay")
                }
                manufacturerData.append((id, bytes))
            }
        }
        if let value = properties["ServiceData"] {
            guard case .dictionary(.string, _, let entries) = value.unwrapped else {
                throw wrongType("ServiceData", "a{sv}")
            }
            for entry in entries {
                guard let text = entry.key.string, let uuid = BluetoothUUID(text), let bytes = entry.value.bytes else {
                    throw wrongType("ServiceData", "a{sv} of UUID → ay")
                }
                serviceData.append((uuid, bytes))
            }
        }
        if let value = properties["Data"] {
            guard case .dictionary(.byte, _, let entries) = value.unwrapped else { throw wrongType("Data", "a{yv}") }
            for entry in entries {
                guard let type = entry.key.uint8, let bytes = entry.value.bytes else {
                    throw wrongType("Data", "a{yv} of ay")
                }
                data.append((type, bytes))
            }
        }
        if let value = properties["Includes"] {
            guard let strings = value.strings else { throw wrongType("Includes", "as") }
            includes = strings.filter(Self.supportedIncludes.contains)
        }
        if let value = properties["LocalName"] {
            guard let name = value.string else { throw wrongType("LocalName", "s") }
            localName = name
        }
        if let value = properties["Appearance"] {
            guard let appearance = value.uint16 else { throw wrongType("Appearance", "q") }
            self.appearance = appearance
        }
        if let value = properties["Discoverable"] {
            guard let discoverable = value.bool else { throw wrongType("Discoverable", "b") }
            guard connectable || !discoverable else {
                throw AdvertisementProblem("a broadcast advertisement cannot be discoverable")
            }
            self.discoverable = discoverable
        }
        if let value = properties["Timeout"] {
            guard let timeout = value.uint16 else { throw wrongType("Timeout", "q") }
            self.timeout = timeout
        }
        if let value = properties["TxPower"] {
            guard let power = value.int16 else { throw wrongType("TxPower", "n") }
            txPower = power
        }
        for (name, type) in [("Duration", "q"), ("DiscoverableTimeout", "q")] where properties[name] != nil {
            guard properties[name]?.uint16 != nil else { throw wrongType(name, type) }
        }
        if let value = properties["SecondaryChannel"] {
            guard let channel = value.string else { throw wrongType("SecondaryChannel", "s") }
            guard ["1M", "2M", "Coded"].contains(channel) else {
                throw AdvertisementProblem("SecondaryChannel \"\(channel)\"")
            }
            secondaryChannel = channel
        }
        let minimum = properties["MinInterval"], maximum = properties["MaxInterval"]
        if minimum != nil, minimum?.uint32 == nil { throw wrongType("MinInterval", "u") }
        if maximum != nil, maximum?.uint32 == nil { throw wrongType("MaxInterval", "u") }
        if let low = minimum?.uint32, let high = maximum?.uint32, low > high {
            throw AdvertisementProblem("MinInterval \(low) > MaxInterval \(high)")
        }
    }

    /// The AD Flags byte the controller sends, if any: a connectable advertisement on an LE-only
    /// controller carries BR/EDR Not Supported, plus LE General Discoverable unless `Discoverable`
    /// is false; a broadcast one carries none.
    public var flags: UInt8? {
        guard connectable else { return nil }
        return discoverable == false ? 0x04 : 0x06
    }

    /// Whether an unfiltered LE scan reports it (LE General Discoverable set).
    public var isDiscoverable: Bool { (flags ?? 0) & 0x03 != 0 }

    /// The TX power a report carries (the TxPower property, else 0 dBm), when included.
    public var advertisedTxPower: Int16? {
        includes.contains("tx-power") ? (txPower ?? 0) : nil
    }

    /// Bytes of every AD structure except the name: flags, service and solicit UUID lists (each
    /// UUID in its shortest form, one list per width), manufacturer data, service data, raw
    /// `Data`, appearance and TX power.
    public var lengthWithoutName: Int {
        func uuidLists(_ uuids: [BluetoothUUID]) -> Int {
            var total = 0
            for width in [BluetoothUUID.Width.bits16, .bits32, .bits128] {
                let count = uuids.filter { Self.width(of: $0) == width }.count
                if count > 0 { total += 2 + count * Self.size(of: width) }
            }
            return total
        }
        var total = flags == nil ? 0 : 3
        total += uuidLists(serviceUUIDs) + uuidLists(solicitUUIDs)
        total += manufacturerData.reduce(0) { $0 + 4 + $1.bytes.count }
        total += serviceData.reduce(0) { $0 + 2 + Self.size(of: Self.width(of: $1.uuid)) + $1.bytes.count }
        total += data.reduce(0) { $0 + 2 + $1.bytes.count }
        if appearance != nil || includes.contains("appearance") { total += 4 }
        if includes.contains("tx-power") { total += 3 }
        return total
    }

    /// The name on air (`LocalName`, else the adapter's alias when "local-name" is included):
    /// complete when it fits after the other structures, else shortened to the room left
    /// (AD type 0x08, as bluetoothd's `bt_ad` does), nil when not even one byte fits.
    public func nameOnAir(adapterAlias: String) -> (name: String, complete: Bool)? {
        guard let name = localName ?? (includes.contains("local-name") ? adapterAlias : nil), !name.isEmpty else {
            return nil
        }
        let room = maximumLength - lengthWithoutName - 2
        let bytes = Array(name.utf8)
        if bytes.count <= room { return (name, true) }
        guard room >= 1 else { return nil }
        var cut = room
        while cut > 0, String(validating: bytes[..<cut], as: UTF8.self) == nil { cut -= 1 }
        return cut > 0 ? (String(decoding: bytes[..<cut], as: UTF8.self), false) : nil
    }

    /// The whole legacy payload's length (with the name as sent).
    public func length(adapterAlias: String) -> Int {
        lengthWithoutName + (nameOnAir(adapterAlias: adapterAlias).map { 2 + $0.name.utf8.count } ?? 0)
    }

    /// The payload's limit: 31 bytes of legacy advertising data, 251 of extended advertising
    /// data (with a `SecondaryChannel`).
    public var maximumLength: Int { secondaryChannel == nil ? Self.maximumLength : Self.extendedMaximumLength }

    /// True when the payload fits (``maximumLength``).
    public var fits: Bool { lengthWithoutName <= maximumLength }

    static func width(of uuid: BluetoothUUID) -> BluetoothUUID.Width { uuid.width }

    static func size(of width: BluetoothUUID.Width) -> Int {
        switch width {
        case .bits16: 2
        case .bits32: 4
        case .bits128: 16
        }
    }
}

/// Why bluetoothd refused an advertisement's properties (logged; the reply is always
/// `Failed` "Failed to parse advertisement.").
public struct AdvertisementProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
