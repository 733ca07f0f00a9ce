import Bluetooth
import DBus

/// One advertising report as the controller delivers it.
public struct AdvertisementReport: Sendable, Equatable {
    public var rssi: Int16
    public var txPower: Int16?
    public var name: String?
    public var serviceUUIDs: [BluetoothUUID]
    public var manufacturerData: [(companyID: UInt16, bytes: [UInt8])]
    public var serviceData: [(uuid: BluetoothUUID, bytes: [UInt8])]

    public init(
        rssi: Int16, txPower: Int16? = nil, name: String? = nil, serviceUUIDs: [BluetoothUUID] = [],
        manufacturerData: [(companyID: UInt16, bytes: [UInt8])] = [],
        serviceData: [(uuid: BluetoothUUID, bytes: [UInt8])] = []
    ) {
        self.rssi = rssi
        self.txPower = txPower
        self.name = name
        self.serviceUUIDs = serviceUUIDs
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
    }

    public static func == (lhs: AdvertisementReport, rhs: AdvertisementReport) -> Bool {
        lhs.rssi == rhs.rssi && lhs.txPower == rhs.txPower && lhs.name == rhs.name
            && lhs.serviceUUIDs == rhs.serviceUUIDs
            && lhs.manufacturerData.map(\.companyID) == rhs.manufacturerData.map(\.companyID)
            && lhs.manufacturerData.map(\.bytes) == rhs.manufacturerData.map(\.bytes)
            && lhs.serviceData.map(\.uuid) == rhs.serviceData.map(\.uuid)
            && lhs.serviceData.map(\.bytes) == rhs.serviceData.map(\.bytes)
    }
}

/// `Device1` properties that an advertisement can change.
public struct AdvertisedProperties: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let rssi = AdvertisedProperties(rawValue: 1 << 0)
    public static let txPower = AdvertisedProperties(rawValue: 1 << 1)
    public static let name = AdvertisedProperties(rawValue: 1 << 2)
    public static let alias = AdvertisedProperties(rawValue: 1 << 3)
    public static let uuids = AdvertisedProperties(rawValue: 1 << 4)
    public static let manufacturerData = AdvertisedProperties(rawValue: 1 << 5)
    public static let serviceData = AdvertisedProperties(rawValue: 1 << 6)
}

/// What bluetoothd remembers of a device's advertisements, and which properties each new report
/// changes (`btd_adapter_update_found_device`, 5.66): RSSI on every report in a filtered scan but
/// only on a ≥ 8 dBm move otherwise; manufacturer and service data merged by key and signalled
/// only on change (DuplicateData: cleared first, so signalled every time); the name when a report
/// carries one; the UUID list as a union until services are resolved.
public struct AdvertisementCache: Sendable {
    public private(set) var rssi: Int16?
    public private(set) var txPower: Int16?
    public private(set) var name: String?
    public private(set) var uuids: [BluetoothUUID] = []
    public private(set) var manufacturerData: [(companyID: UInt16, bytes: [UInt8])] = []
    public private(set) var serviceData: [(uuid: BluetoothUUID, bytes: [UInt8])] = []

    public init() {}

    /// What bluetoothd stores of a device that is not temporary and loads at its next start:
    /// the name and the service UUIDs, not what only the last advertisement said (RSSI, TX
    /// power, manufacturer and service data).
    public func stored() -> AdvertisementCache {
        var kept = AdvertisementCache()
        kept.name = name
        kept.uuids = uuids
        return kept
    }

    /// Applies a report and returns the properties that changed (each to be signalled in one
    /// combined PropertiesChanged).
    public mutating func apply(
        _ report: AdvertisementReport, filteredDiscovery: Bool, duplicateData: Bool, servicesResolved: Bool = false
    ) -> AdvertisedProperties {
        var changed: AdvertisedProperties = []
        if let old = rssi {
            if filteredDiscovery || abs(Int(old) - Int(report.rssi)) >= 8 {
                rssi = report.rssi
                changed.insert(.rssi)
            }
        } else {
            rssi = report.rssi
            changed.insert(.rssi)
        }
        if let power = report.txPower, power != txPower {
            txPower = power
            changed.insert(.txPower)
        }
        if let newName = report.name, newName != name {
            name = newName
            changed.formUnion([.name, .alias])
        }
        if !servicesResolved {
            for uuid in report.serviceUUIDs where !uuids.contains(uuid) {
                uuids.append(uuid)
                changed.insert(.uuids)
            }
        }
        if Self.merge(
            report.manufacturerData, into: &manufacturerData, duplicateData: duplicateData, key: { $0.companyID },
            bytes: { $0.bytes })
        {
            changed.insert(.manufacturerData)
        }
        if Self.merge(
            report.serviceData, into: &serviceData, duplicateData: duplicateData, key: { $0.uuid }, bytes: { $0.bytes })
        {
            changed.insert(.serviceData)
        }
        return changed
    }

    /// Merges a report's data by key (manufacturer or service data); true when a value changed
    /// or a key came (always with `duplicateData`, which clears what was cached first).
    private static func merge<Element, Key: Equatable>(
        _ report: [Element], into cached: inout [Element], duplicateData: Bool, key: (Element) -> Key,
        bytes: (Element) -> [UInt8]
    ) -> Bool {
        if duplicateData && !report.isEmpty { cached.removeAll() }
        var changed = false
        for element in report {
            if let index = cached.firstIndex(where: { key($0) == key(element) }) {
                if bytes(cached[index]) != bytes(element) || duplicateData {
                    cached[index] = element
                    changed = true
                }
            } else {
                cached.append(element)
                changed = true
            }
        }
        return changed
    }

    /// Discovery ended: RSSI and TxPower stop existing (signalled as invalidated properties).
    public mutating func discoveryStopped() -> AdvertisedProperties {
        var invalidated: AdvertisedProperties = []
        if rssi != nil { invalidated.insert(.rssi) }
        if txPower != nil { invalidated.insert(.txPower) }
        rssi = nil
        txPower = nil
        return invalidated
    }

    /// `Device1.ManufacturerData` (`a{qv}`), nil while empty.
    var manufacturerDataValue: DBusValue? {
        guard !manufacturerData.isEmpty else { return nil }
        return .dictionary(
            key: .uint16, value: .variant,
            manufacturerData.map { DBusDictionaryEntry(.uint16($0.companyID), .variant(.bytes($0.bytes))) })
    }

    /// `Device1.ServiceData` (`a{sv}`, 128-bit UUID keys), nil while empty.
    var serviceDataValue: DBusValue? {
        guard !serviceData.isEmpty else { return nil }
        return .dictionary(
            key: .string, value: .variant,
            serviceData.map { DBusDictionaryEntry(.string($0.uuid.description), .variant(.bytes($0.bytes))) })
    }
}
