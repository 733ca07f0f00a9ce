import Bluetooth
import Foundation
import Gateway
import Parsers

/// `gattway-bench run presence`: the cost per report of telling which presence identity sent it
/// (``PresenceMatcher``: the resolvable private addresses resolved against the IRKs with the
/// cache), with 0, 10 and 100 identities, over one simulated hour at 1,000 reports/s: 100
/// devices heard 10 times a second each, at random moments — 10 enrolled phones and 40 strangers'
/// phones, each rotating its RPA every 15 minutes at a random phase, and 50 sensors with public
/// addresses. The reports are made before the clock starts; one core, the loop's work only.
/// A second row per count is the worst case: every report a new made-up RPA (a flood).
enum PresenceBench: BenchSuite {
    static let name = "presence"
    static let reportsPerSecond = 1000
    static let seconds = 3600
    static let rotation = 900.0

    /// xorshift64*: reproducible phases and order.
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            return state &* 2_685_821_657_736_338_717
        }
        mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    }

    static func irk(_ seed: Int) -> [UInt8] { (0..<16).map { UInt8(truncatingIfNeeded: seed &* 31 &+ $0 &* 7 &+ 1) } }

    static func run() async throws -> [BenchRow] {
        var random = Random(state: 0x6761_7474_7761_7921)
        let phones = 50  // 0..<10 enrolled, 10..<50 strangers
        let sensors = 50
        let ciphers = (0..<phones).compactMap { AESBlockCipher(key: irk(1000 + $0)) }
        let phases = (0..<phones).map { _ in Double(random.below(900_000)) / 1000 }
        // Each phone's address per 15-minute epoch (an hour at a random phase spans up to 5).
        let epochs = Int(Double(seconds) / rotation) + 2
        let addresses: [[BluetoothAddress]] = (0..<phones).map { phone in
            (0..<epochs).map { epoch in
                RandomAddressHash.address(
                    ciphers[phone], random: UInt32(truncatingIfNeeded: phone &* 7919 &+ epoch &* 104_729))
                    ?? BluetoothAddress(rawValue: 0)
            }
        }
        let total = reportsPerSecond * seconds
        var reports: [(address: BluetoothAddress, type: BluetoothAddress.AddressType)] = []
        reports.reserveCapacity(total)
        for index in 0..<total {
            let time = Double(index) / Double(reportsPerSecond)
            let device = random.below(phones + sensors)
            if device < phones {
                let epoch = Int((time + phases[device]) / rotation)
                reports.append((addresses[device][epoch], .random))
            } else {
                reports.append((BluetoothAddress(rawValue: 0xA4C1_3800_0000 | UInt64(device)), .public))
            }
        }
        let advertisement = AdvertisementData(rssi: -70)
        var rows: [BenchRow] = []
        for count in [0, 10, 100] {
            // The enrolled phones first, then made-up IRKs up to `count`.
            let identities = (0..<count).map { index in
                PresenceIdentity(name: "id\(index)", key: .irk(irk(index < 10 ? 1000 + index : 5000 + index)))
            }
            let matcher = PresenceMatcher(identities)
            let clock = ContinuousClock()
            var found = 0
            let start = clock.now
            for report in reports {
                if matcher.identify(report.address, type: report.type, advertisement: advertisement) != nil {
                    found &+= 1
                }
            }
            let elapsed = clock.now - start
            let nanoseconds =
                (Double(elapsed.components.seconds) * 1e9
                    + Double(elapsed.components.attoseconds) / 1e9) / Double(total)
            let resolver = matcher.resolver
            rows.append(
                BenchRow(
                    name: "presence: resolving, \(count) identities (1 h at 1,000 reports/s)", value: nanoseconds,
                    unit: "ns/report",
                    detail:
                        "\(String(format: "%.4f", nanoseconds * Double(reportsPerSecond) / 1e7)) % of a core; \(total) reports, \(found) from enrolled phones; \(resolver.tried) addresses tried (\(resolver.aesBlocks) AES blocks), \(resolver.hits) cache hits"
                ))

            // The worst case: every report a new random RPA, each tried against every IRK.
            let flood = PresenceMatcher(identities)
            let floodCount = count == 0 ? 1_000_000 : max(20_000, 2_000_000 / count)
            let floodStart = clock.now
            for index in 0..<floodCount {
                let address = BluetoothAddress(rawValue: 0x4000_0000_0000 | (random.next() & 0x3FFF_FFFF_FFFF))
                if flood.identify(address, type: .random, advertisement: advertisement) != nil { found &+= 1 }
                _ = index
            }
            let floodElapsed = clock.now - floodStart
            let floodNanoseconds =
                (Double(floodElapsed.components.seconds) * 1e9
                    + Double(floodElapsed.components.attoseconds) / 1e9) / Double(floodCount)
            rows.append(
                BenchRow(
                    name: "presence: a new RPA every report, \(count) identities", value: floodNanoseconds,
                    unit: "ns/report",
                    detail:
                        "\(floodCount) made-up RPAs; cache \(flood.resolver.cached) of \(flood.resolver.capacity), \(flood.resolver.evicted) evicted"
                ))
        }
        return rows
    }
}
