import Bluetooth
import Parsers

/// What a device address is (Core spec Vol 6 Part B 1.3): who assigned it and, for a random one,
/// which of the three kinds its two most significant bits say it is.
public enum AddressKind: Sendable, Equatable {
    case publicAddress
    /// Top bits 11: fixed while the device is powered.
    case staticRandom
    /// Top bits 01: made from the device's IRK (`prand` in bits 47–24, `hash` in bits 23–0),
    /// replaced every few minutes; resolvable by whoever holds the IRK.
    case resolvablePrivate
    /// Top bits 00: random and resolvable by no one.
    case nonResolvablePrivate
    /// Top bits 10 in a random address: reserved, none of the above.
    case reserved

    /// The kind of `address` of `type`; nil when the type is not known (a public address with
    /// top bits 01 is no resolvable private address, so the bits alone do not tell).
    public init?(_ address: BluetoothAddress, type: BluetoothAddress.AddressType?) {
        switch type {
        case nil: return nil
        case .public?: self = .publicAddress
        case .random?:
            switch address.rawValue >> 46 {
            case 0b11: self = .staticRandom
            case 0b01: self = .resolvablePrivate
            case 0b00: self = .nonResolvablePrivate
            default: self = .reserved
            }
        }
    }
}

/// Resolves resolvable private addresses against the IRKs of the presence identities, with a
/// cache: an address seen before costs one dictionary look-up (its identity, or that it has
/// none), a new one is tried against every IRK once (one AES block each). The cache holds at
/// most ``capacity`` addresses; when full, the least recently seen quarter goes at once (one sort
/// per ``capacity``/4 new addresses under a flood, not a search per address), counted in
/// ``evicted``. Loop-confined; made anew when the identities change.
package final class IdentityResolver {
    /// Addresses remembered. Phones rotate every ~15 minutes: 4,096 is some 1,000 devices in view.
    package static let defaultCapacity = 4096

    private struct Entry {
        /// Index of the identity in the list given at init; -1: none.
        var identity: Int32
        var lastUsed: UInt64
    }

    private let ciphers: [(identity: Int32, cipher: AESBlockCipher)]
    private var cache: [BluetoothAddress: Entry] = [:]
    private var tick: UInt64 = 0
    package let capacity: Int

    /// Addresses looked up, found in the cache, tried against the IRKs (one AES block per IRK
    /// each), resolved to an identity among those tried, and dropped from the cache.
    package private(set) var lookups = 0
    package private(set) var hits = 0
    package private(set) var tried = 0
    package private(set) var aesBlocks = 0
    package private(set) var resolved = 0
    package private(set) var evicted = 0

    /// `irks`: each identity's index (in the caller's list) and IRK. An IRK libcrypto refuses
    /// (none of 16 bytes is) is left out.
    package init(irks: [(identity: Int, irk: [UInt8])], capacity: Int = IdentityResolver.defaultCapacity) {
        ciphers = irks.compactMap { entry in
            AESBlockCipher(key: entry.irk).map { (Int32(truncatingIfNeeded: entry.identity), $0) }
        }
        self.capacity = max(4, capacity)
    }

    package var isEmpty: Bool { ciphers.isEmpty }
    package var cached: Int { cache.count }

    /// The identity whose IRK made `address` (a resolvable private address: the caller has
    /// checked its kind), or nil.
    package func resolve(_ address: BluetoothAddress) -> Int? {
        lookups += 1
        tick &+= 1
        if let index = cache.index(forKey: address) {
            hits += 1
            cache.values[index].lastUsed = tick
            let identity = cache.values[index].identity
            return identity < 0 ? nil : Int(identity)
        }
        tried += 1
        var found: Int32 = -1
        for (identity, cipher) in ciphers {
            aesBlocks += 1
            if RandomAddressHash.matches(address, cipher) {
                found = identity
                resolved += 1
                break
            }
        }
        if cache.count >= capacity { evictQuarter() }
        cache[address] = Entry(identity: found, lastUsed: tick)
        return found < 0 ? nil : Int(found)
    }

    private func evictQuarter() {
        let drop = capacity / 4
        let newestDropped = cache.values.map(\.lastUsed).sorted()[drop - 1]
        let before = cache.count
        cache = cache.filter { $0.value.lastUsed > newestDropped }
        evicted += before - cache.count
    }
}
