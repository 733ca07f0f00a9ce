import Bluetooth

/// Which presence identity sent a report, if any: by fixed address (one dictionary look-up), by
/// resolvable private address against the IRKs (``IdentityResolver``: a look-up once the address
/// is known), or by iBeacon or Eddystone-UID frame. Each way costs something only when an
/// identity of its kind exists. Loop-confined; made anew when the identities change.
package final class PresenceMatcher {
    /// The identity (its index in the list given at init) and what the report said of its power.
    package struct Match: Equatable {
        package var identity: Int
        package var power: PathLoss.AdvertisedPower?

        package init(identity: Int, power: PathLoss.AdvertisedPower?) {
            self.identity = identity
            self.power = power
        }
    }

    private struct BeaconKey: Hashable {
        var high: UInt64
        var low: UInt64
        var extra: UInt32
    }

    package let resolver: IdentityResolver
    private var addresses: [BluetoothAddress: Int] = [:]
    private var iBeacons: [BeaconKey: Int] = [:]
    private var eddystones: [BeaconKey: Int] = [:]

    package init(_ identities: [PresenceIdentity], cacheCapacity: Int = IdentityResolver.defaultCapacity) {
        var irks: [(identity: Int, irk: [UInt8])] = []
        for (index, identity) in identities.enumerated() {
            switch identity.key {
            case .irk(let irk): irks.append((index, irk))
            case .address(let address): addresses[address] = index
            case .iBeacon(let uuid, let major, let minor):
                iBeacons[Self.key(uuid[...], UInt32(major) << 16 | UInt32(minor))] = index
            case .eddystoneUID(let namespace, let instance):
                eddystones[Self.key((namespace + instance)[...], 0)] = index
            }
        }
        resolver = IdentityResolver(irks: irks, capacity: cacheCapacity)
    }

    private static let eddystoneService = BluetoothUUID(0xFEAA)

    /// The identity that sent the report of `address` (of `type`, nil when the port did not
    /// say: then no address is tried as resolvable) carrying `advertisement`.
    package func identify(
        _ address: BluetoothAddress, type: BluetoothAddress.AddressType?, advertisement: AdvertisementData
    ) -> Match? {
        let advertised = advertisement.txPower.map { PathLoss.AdvertisedPower.atSource($0) }
        if !addresses.isEmpty, let identity = addresses[address] {
            return Match(identity: identity, power: advertised)
        }
        if !resolver.isEmpty, AddressKind(address, type: type) == .resolvablePrivate,
            let identity = resolver.resolve(address)
        {
            return Match(identity: identity, power: advertised)
        }
        if !iBeacons.isEmpty, let payload = advertisement.manufacturerData[0x004C], payload.count >= 23,
            payload[0] == 0x02, payload[1] == 0x15
        {
            let major = UInt32(payload[18]) << 8 | UInt32(payload[19])
            let minor = UInt32(payload[20]) << 8 | UInt32(payload[21])
            if let identity = iBeacons[Self.key(payload[2..<18], major << 16 | minor)] {
                return Match(identity: identity, power: .atOneMetre(Int8(bitPattern: payload[22])))
            }
        }
        if !eddystones.isEmpty, let payload = advertisement.serviceData[Self.eddystoneService], payload.count >= 18,
            payload[0] == 0x00, let identity = eddystones[Self.key(payload[2..<18], 0)]
        {
            return Match(identity: identity, power: .atSource(Int8(bitPattern: payload[1])))
        }
        return nil
    }

    /// 16 bytes (most significant first) and a 32-bit extra as one hashable key.
    private static func key(_ bytes: ArraySlice<UInt8>, _ extra: UInt32) -> BeaconKey {
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (offset, byte) in bytes.enumerated() {
            if offset < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
        }
        return BeaconKey(high: high, low: low, extra: extra)
    }
}
