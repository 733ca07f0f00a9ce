import Foundation
import Gateway

/// `gattway-bench run fleet`: the fleet protocol (docs/fleet.md) at scale, in virtual time: 10
/// gateways, each the `FleetView` that `gattway run` keeps, and 100 devices, each advertising once
/// a second and heard by the gateways within 12 m of it (2–3 of them) at an RSSI from the
/// distance plus ±4 dB of jitter per advertisement. Messages go out as `gattway run` sends them
/// (every `lease / 5`, and at once when a claim changes), through the codec, to every other
/// gateway, which decides at each one; everything decides once a second. Five minutes, in which
/// ten devices walk 20 m (into other gateways' areas) between minute 1 and 2, and one gateway dies
/// at minute 3 (its messages stop: a lapse). No broker and no radio: what it measures is the
/// protocol — duplicates, readings nobody published, ownership changes, the protocol's own traffic
/// and the CPU of the decisions — not the MQTT path, which the other suites measure.
enum FleetBench: BenchSuite {
    static let name = "fleet"

    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
    }

    static func run() async throws -> [BenchRow] {
        let gateways = 10
        let devicesCount = 100
        let lease = 15.0
        let duration = 300.0
        let spacing = 10.0
        let range = 12.0
        var random = Random(state: 42)
        var views = (0..<gateways).map { index in
            FleetView(
                settings: FleetView.Settings(
                    me: "gw-\(index)", hysteresis: 6, handoverAfter: 30, lease: lease), now: 0)
        }
        var alive = [Bool](repeating: true, count: gateways)
        var start = (0..<devicesCount).map { _ in random.unit() * spacing * Double(gateways - 1) }
        var position = start
        let walkers = Set((0..<10).map { $0 * 10 + 3 })
        let addresses = (0..<devicesCount).map { UInt64(0xA4C1_3800_0000 + $0) }
        var counters = [UInt64](repeating: 0, count: devicesCount)
        var nextMessage = [Double](repeating: 0, count: gateways)
        var announced = [[UInt64: FleetView.Claim]](repeating: [:], count: gateways)
        var bytesSent = [Int](repeating: 0, count: gateways)
        var messagesSent = 0
        var duplicates = 0
        var lost = 0
        var lostAtDeath = 0
        var published = 0
        var gains = [Int](repeating: 0, count: devicesCount)
        var firstOwnerAt = [Double?](repeating: nil, count: devicesCount)
        var cpu = 0.0
        let dead = 4
        let deathAt = 180.0
        var takeovers: [Double] = []
        var orphanedSince: [Int: Double] = [:]
        /// The devices the dead gateway owned.
        var orphans = Set<Int>()

        func mean(_ device: Int, _ gateway: Int) -> Double? {
            let distance = abs(position[device] - Double(gateway) * spacing)
            return distance <= range ? -40 - 2.5 * distance : nil
        }
        // Messages in flight: (sender, bytes); delivered in order, each followed by the
        // receiver's decision, which may send more.
        var queue: [(Int, [UInt8])] = []
        func send(_ gateway: Int, now: Double) {
            let bytes = FleetMessageCodec.encode(views[gateway].message(now: now))
            bytesSent[gateway] += bytes.count
            messagesSent += 1
            announced[gateway] = views[gateway].claims
            nextMessage[gateway] = now + lease / 5
            queue.append((gateway, bytes))
        }
        func decided(_ gateway: Int, _ changes: [FleetView.Change], now: Double) {
            for case .gained(let address) in changes {
                let device = Int(address - 0xA4C1_3800_0000)
                gains[device] += 1
                if firstOwnerAt[device] == nil { firstOwnerAt[device] = now }
            }
            if views[gateway].claims != announced[gateway] { send(gateway, now: now) }
        }
        func deliver(now: Double) {
            while !queue.isEmpty {
                let (sender, bytes) = queue.removeFirst()
                guard let message = try? FleetMessageCodec.decode(bytes) else { continue }
                for receiver in 0..<gateways where receiver != sender && alive[receiver] {
                    let clock = DispatchTime.now().uptimeNanoseconds
                    views[receiver].received(message, now: now)
                    let changes = views[receiver].evaluate(now: now)
                    cpu += Double(DispatchTime.now().uptimeNanoseconds - clock) / 1e9
                    decided(receiver, changes, now: now)
                }
            }
        }

        let step = 0.1
        var now = 0.0
        while now < duration {
            now += step
            let second = (now * 10).rounded() / 10
            if now >= deathAt, alive[dead] {
                alive[dead] = false
                for (index, address) in addresses.enumerated() where views[dead].role(address) == .owner {
                    orphans.insert(index)
                }
            }
            // Walkers move 20 m between minute 1 and 2.
            if now > 60, now <= 120 {
                for device in walkers { position[device] = start[device] + 20 * (now - 60) / 60 }
            }
            // Advertisements: device d advertises at second fractions d % 10 / 10.
            for device in 0..<devicesCount where Int((second * 10).rounded()) % 10 == device % 10 {
                counters[device] &+= 1
                var publishers = 0
                var hearers = 0
                for gateway in 0..<gateways where alive[gateway] {
                    guard let level = mean(device, gateway) else { continue }
                    hearers += 1
                    let rssi = Int((level + (random.unit() * 8 - 4)).rounded())
                    let clock = DispatchTime.now().uptimeNanoseconds
                    views[gateway].heard(addresses[device], rssi: rssi, now: now)
                    views[gateway].decoded(addresses[device], key: counters[device])
                    if views[gateway].publishes(addresses[device], key: counters[device], now: now) { publishers += 1 }
                    cpu += Double(DispatchTime.now().uptimeNanoseconds - clock) / 1e9
                }
                published += min(publishers, 1)
                duplicates += max(0, publishers - 1)
                if publishers == 0, hearers > 0, now > lease + 2 {
                    if now >= deathAt, now < deathAt + lease + 3 { lostAtDeath += 1 } else { lost += 1 }
                    if now >= deathAt, orphanedSince[device] == nil { orphanedSince[device] = now }
                } else if publishers > 0, let since = orphanedSince.removeValue(forKey: device) {
                    takeovers.append(now - max(since, deathAt))
                }
            }
            // Each gateway decides once a second and when a decision is due by itself (as
            // `gattway run`'s timer does, to the step); messages when due.
            let onTheSecond = abs(second - second.rounded()) < 1e-9
            for gateway in 0..<gateways where alive[gateway] {
                if onTheSecond || now >= views[gateway].nextDecision {
                    let clock = DispatchTime.now().uptimeNanoseconds
                    let changes = views[gateway].evaluate(now: now)
                    cpu += Double(DispatchTime.now().uptimeNanoseconds - clock) / 1e9
                    decided(gateway, changes, now: now)
                }
                if onTheSecond, now >= nextMessage[gateway] { send(gateway, now: now) }
            }
            deliver(now: now)
        }
        _ = start
        start = []
        let initial = devicesCount
        let changes = gains.reduce(0, +) - initial
        let stationary = (0..<devicesCount).filter { !walkers.contains($0) && !orphans.contains($0) }
        let stationaryChanges = stationary.reduce(0) { $0 + max(0, gains[$1] - 1) }
        let hours = duration / 3600
        let takeoverMax = takeovers.max() ?? 0
        return [
            BenchRow(
                name: "fleet: readings published twice", value: Double(duplicates), unit: "readings", target: "0",
                detail:
                    "10 gateways, 100 devices (2–3 gateways each, ±4 dB jitter), 5 virtual minutes, \(published) readings published"
            ),
            BenchRow(
                name: "fleet: readings nobody published (outside the first lease)", value: Double(lost),
                unit: "readings",
                detail: "plus \(lostAtDeath) in the lapse window after a gateway died (its lease, 15 s)"),
            BenchRow(
                name: "fleet: ownership changes per device per hour",
                value: Double(changes) / Double(devicesCount) / hours,
                unit: "changes/device/h",
                detail:
                    "\(changes) changes after the first owners: 10 walkers moving 20 m, one gateway dying (\(orphans.count) devices); \(stationaryChanges) among the \(stationary.count) other devices"
            ),
            BenchRow(
                name: "fleet: takeover after a gateway died, slowest device", value: takeoverMax, unit: "s",
                target: "≤ lease + 2 = 17", detail: "\(takeovers.count) devices taken over"),
            BenchRow(
                name: "fleet: protocol traffic per gateway",
                value: Double(bytesSent.reduce(0, +)) / Double(gateways) / duration,
                unit: "bytes/s", detail: "\(messagesSent) messages, every lease/5 and on claim changes"),
            BenchRow(
                name: "fleet: CPU of the ownership decisions per gateway",
                value: cpu / Double(gateways) / duration * 1e6,
                unit: "µs/s", detail: "FleetView calls only (heard, publishes, received, evaluate), this machine"),
        ]
    }
}
