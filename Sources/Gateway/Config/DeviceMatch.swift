import Bluetooth
import JSON

/// The `match` of a device rule. Every condition given must hold; an empty match matches
/// every device the scan reports.
public struct DeviceMatch: Sendable, Equatable {
    /// `address`: one address or a list.
    public var addresses: [BluetoothAddress] = []
    /// `address_prefix`: the first octets, e.g. `A4:C1:38`.
    public var addressPrefix: [UInt8] = []
    /// `name`: the advertised local name, with `*` and `?` wildcards.
    public var namePattern: String?
    /// `services`: at least one of these is advertised (service UUID or service data).
    public var services: [BluetoothUUID] = []
    /// `manufacturer_id`: manufacturer data of this company id is present.
    public var manufacturerID: UInt16?

    public init() {}

    init(_ object: inout ConfigObject) {
        let problems = object.problems
        if let value = object.value("address") {
            let items: [JSONReader] = (try? value.array()) ?? [value]
            for item in items {
                guard let text = problems.attempt({ try item.string() }) else { continue }
                if let address = BluetoothAddress(text) {
                    addresses.append(address)
                } else {
                    problems.add(
                        item.path,
                        "\"\(text)\" is not a Bluetooth address (expected six hex octets, e.g. A4:C1:38:0B:12:34)")
                }
            }
        }
        addressPrefix = object.read("address_prefix", default: []) { reader in
            let text = try reader.string()
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            let octets = parts.compactMap { $0.count == 2 ? UInt8($0, radix: 16) : nil }
            guard octets.count == parts.count, (1...5).contains(octets.count) else {
                throw reader.fail("\"\(text)\" is not an address prefix (expected 1 to 5 hex octets, e.g. A4:C1:38)")
            }
            return octets
        }
        namePattern = object.optional("name") { try $0.nonEmptyString() }
        services = object.read("services", default: []) { reader in
            try reader.array().compactMap { item in problems.attempt { try item.uuid() } }
        }
        manufacturerID = object.optional("manufacturer_id") { UInt16(try $0.integer(in: 0...0xFFFF)) }
        object.finish()
    }

    /// True when `address` and `advertisement` satisfy every condition.
    public func matches(_ address: BluetoothAddress, _ advertisement: AdvertisementData) -> Bool {
        guard mayMatch(address) else { return false }
        if let namePattern {
            guard let name = advertisement.localName, Self.glob(namePattern, name) else { return false }
        }
        if !services.isEmpty, !services.contains(where: { advertisement.advertises($0) }) { return false }
        if let manufacturerID, advertisement.manufacturerData[manufacturerID] == nil { return false }
        return true
    }

    /// True when `address` satisfies the address conditions (`address`, `address_prefix`): the
    /// rule matches the device if its advertisements satisfy the rest.
    func mayMatch(_ address: BluetoothAddress) -> Bool {
        if !addresses.isEmpty, !addresses.contains(address) { return false }
        if !addressPrefix.isEmpty {
            for (index, octet) in addressPrefix.enumerated()
            where UInt8(truncatingIfNeeded: address.rawValue >> (40 - 8 * UInt64(index))) != octet {
                return false
            }
        }
        return true
    }

    /// `*` matches any run of characters, `?` one character.
    public static func glob(_ pattern: String, _ text: String) -> Bool {
        let p = Array(pattern.unicodeScalars), t = Array(text.unicodeScalars)
        var pi = 0, ti = 0, star = -1, mark = 0
        while ti < t.count {
            if pi < p.count, p[pi] == "?" || p[pi] == t[ti] {
                pi += 1
                ti += 1
            } else if pi < p.count, p[pi] == "*" {
                star = pi
                mark = ti
                pi += 1
            } else if star >= 0 {
                pi = star + 1
                mark += 1
                ti = mark
            } else {
                return false
            }
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }
}

extension AdvertisementData {
    /// True when `service` is in the advertised service UUIDs or carries service data (a scan's
    /// service filter: the core's `scan.services` check, the central's per-scan check).
    public func advertises(_ service: BluetoothUUID) -> Bool {
        serviceUUIDs.contains(service) || serviceData[service] != nil
    }
}
