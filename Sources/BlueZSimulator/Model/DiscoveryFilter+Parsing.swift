import Bluetooth
import DBus

extension DiscoveryFilter {
    /// The keys `Adapter1.GetDiscoveryFilters` lists in 5.66.
    public static let supportedKeys = [
        "UUIDs", "RSSI", "Pathloss", "Transport", "DuplicateData", "Discoverable", "Pattern",
    ]

    /// Parses the `a{sv}` of `SetDiscoveryFilter`; nil for an empty dictionary (clear the filter).
    /// - Throws: `org.bluez.Error.InvalidArguments` for an unknown key, a wrong variant type, a bad
    ///   UUID, RSSI outside −127…20, Pathloss above 137, RSSI and Pathloss together, or an unknown
    ///   transport — as bluetoothd does.
    public static func parse(_ entries: [DBusDictionaryEntry]) throws -> DiscoveryFilter? {
        guard !entries.isEmpty else { return nil }
        var filter = DiscoveryFilter()
        for entry in entries {
            guard let key = entry.key.string, case .variant(let value) = entry.value else {
                throw BlueZError.invalidArguments
            }
            switch (key, value) {
            case ("UUIDs", .array(.string, _)):
                var uuids: [BluetoothUUID] = []
                for text in value.strings ?? [] {
                    guard let uuid = BluetoothUUID(text) else { throw BlueZError.invalidArguments }
                    uuids.append(uuid)
                }
                filter.uuids = uuids
            case ("RSSI", .int16(let rssi)):
                guard (-127...20).contains(rssi) else { throw BlueZError.invalidArguments }
                filter.rssi = rssi
            case ("Pathloss", .uint16(let pathloss)):
                guard pathloss <= 137 else { throw BlueZError.invalidArguments }
                filter.pathloss = pathloss
            case ("Transport", .string(let text)):
                guard let transport = Transport(rawValue: text) else { throw BlueZError.invalidArguments }
                filter.transport = transport
            case ("DuplicateData", .boolean(let flag)):
                filter.duplicateData = flag
            case ("Discoverable", .boolean(let flag)):
                filter.discoverable = flag
            case ("Pattern", .string(let text)):
                filter.pattern = text
            default:
                throw BlueZError.invalidArguments
            }
        }
        if filter.rssi != nil && filter.pathloss != nil { throw BlueZError.invalidArguments }
        return filter
    }
}
