import FIFOQueue
import JSON
import Parsers

/// The readings of the last hours, for the web page's charts: per device and numeric attribute, a
/// ring of recent points (one per ``Tier/step`` seconds, the mean of the readings within it) and a
/// ring of older ones (coarser steps). Fed where the core applies readings
/// (``Gateway``'s `apply`), on the loop thread; read by the page through ``Gateway/history(of:)``.
///
/// Bounded: a ring never holds more than its tier's ``Tier/points``; a device keeps at most
/// ``maxAttributes`` series (numbers only: strings, booleans, lists and null are left out); and all
/// devices together at most ``maxSeries`` series — a new series beyond that is refused, counted in
/// ``refused``, until a device is removed (`max_devices` and `forget_after` bound the devices). A
/// series takes at most ``seriesBytes`` bytes, so the history at most `maxSeries × seriesBytes`.
/// Loop-confined.
final class ReadingHistory {
    /// One point: when (tenths of a second since ``origin``) and the mean of its readings.
    struct Point: Equatable, Sendable {
        var time: UInt32
        var value: Float
    }

    /// One resolution: a point per `step` seconds, the last `points` of them.
    struct Tier: Sendable {
        var step: Double
        var points: Int
    }

    /// The readings of one step not closed yet.
    struct Open {
        var start: Double = -1
        var sum: Double = 0
        var count: Int = 0

        var point: Float { Float(sum / Double(count)) }
    }

    /// One attribute's history.
    struct Series {
        let name: String
        var recent = FIFO<Point>()
        var older = FIFO<Point>()
        var openRecent = Open()
        var openOlder = Open()
    }

    /// The default tiers: every 2 s for the last 15 minutes, every minute for the last 6 hours.
    static let defaultTiers = (recent: Tier(step: 2, points: 450), older: Tier(step: 60, points: 360))
    /// The default bound on series over all devices (some 5 MB at most with the default tiers).
    static let defaultMaxSeries = 640
    /// Series one device keeps at most (a device with more numeric attributes charts the first ones).
    static let maxAttributes = 24

    let recentTier: Tier
    let olderTier: Tier
    let maxSeries: Int
    /// The wall clock (seconds since 1970) points count from: the first reading's.
    private(set) var origin: Double?
    /// Per registry slot, the device's series.
    private var devices: [[Series]] = []
    private(set) var seriesCount = 0
    /// Series refused for the bounds (``maxSeries`` or ``maxAttributes``).
    private(set) var refused = 0

    init(
        recent: Tier = defaultTiers.recent, older: Tier = defaultTiers.older, maxSeries: Int = defaultMaxSeries
    ) {
        recentTier = recent
        olderTier = older
        self.maxSeries = maxSeries
    }

    /// The most bytes one series takes: both rings at the capacity they grow to (a power of two).
    var seriesBytes: Int {
        func ring(_ points: Int) -> Int { max(1, points).nextPowerOfTwo * MemoryLayout<Point>.stride }
        return ring(recentTier.points) + ring(olderTier.points) + MemoryLayout<Series>.stride
    }

    /// Records the numeric readings of the device in `id`'s slot at `wall` (seconds since 1970).
    func record(_ id: DeviceID, _ readings: [Reading], wall: Double) {
        if id.index >= devices.count {
            devices.append(contentsOf: repeatElement([], count: id.index + 1 - devices.count))
        }
        let origin = self.origin ?? wall
        self.origin = origin
        let time = wall - origin
        for reading in readings {
            guard case .number(let number) = reading.value, number.isFinite else { continue }
            // A device's readings come in the same order every time: a short linear search.
            var index = devices[id.index].firstIndex { $0.name == reading.name }
            if index == nil {
                guard seriesCount < maxSeries, devices[id.index].count < Self.maxAttributes else {
                    refused += 1
                    continue
                }
                devices[id.index].append(Series(name: reading.name))
                seriesCount += 1
                index = devices[id.index].count - 1
            }
            guard let index else { continue }
            add(number, at: time, to: &devices[id.index][index])
        }
    }

    private func add(_ value: Double, at time: Double, to series: inout Series) {
        Self.add(value, at: time, tier: recentTier, open: &series.openRecent, ring: &series.recent)
        Self.add(value, at: time, tier: olderTier, open: &series.openOlder, ring: &series.older)
    }

    /// Adds a reading to the step open in `tier`; a reading past that step closes it into the ring
    /// (dropping the oldest point when it is full) and opens the reading's step.
    private static func add(_ value: Double, at time: Double, tier: Tier, open: inout Open, ring: inout FIFO<Point>) {
        let start = (time / tier.step).rounded(.down) * tier.step
        if open.count > 0, start != open.start {
            close(open, tier: tier, into: &ring)
            open = Open()
        }
        if open.count == 0 { open.start = start }
        open.sum += value
        open.count += 1
    }

    private static func close(_ open: Open, tier: Tier, into ring: inout FIFO<Point>) {
        guard tier.points > 0 else { return }
        while ring.count >= tier.points { ring.removeFirst() }
        ring.append(Point(time: tenths(open.start), value: open.point))
    }

    private static func tenths(_ seconds: Double) -> UInt32 {
        let value = (seconds * 10).rounded()
        return value <= 0 ? 0 : value >= Double(UInt32.max) ? UInt32.max : UInt32(value)
    }

    /// The device in `id`'s slot was removed: its series go.
    func removed(_ id: DeviceID) {
        guard id.index < devices.count else { return }
        seriesCount -= devices[id.index].count
        devices[id.index] = []
    }

    /// One attribute's points, oldest first: the older tier's up to where the recent one starts,
    /// then the recent one's, then the step still open (times in milliseconds since 1970).
    struct Chart: Sendable, Equatable {
        var name: String
        var points: [(time: Int64, value: Float)]

        static func == (lhs: Chart, rhs: Chart) -> Bool {
            lhs.name == rhs.name && lhs.points.elementsEqual(rhs.points) { $0.time == $1.time && $0.value == $1.value }
        }
    }

    /// The device's charts, in the order its attributes first came.
    func charts(_ id: DeviceID) -> [Chart] {
        guard id.index < devices.count, let origin else { return [] }
        func wall(_ tenths: UInt32) -> Int64 { Int64(saturating: (origin * 1000).rounded()) + Int64(tenths) * 100 }
        return devices[id.index].map { series in
            var recent = Array(series.recent)
            if series.openRecent.count > 0 {
                recent.append(Point(time: Self.tenths(series.openRecent.start), value: series.openRecent.point))
            }
            let recentStart = recent.first?.time ?? UInt32.max
            var points = series.older.filter { $0.time < recentStart }.map { (wall($0.time), $0.value) }
            if recent.isEmpty, series.openOlder.count > 0 {
                points.append((wall(Self.tenths(series.openOlder.start)), series.openOlder.point))
            }
            points += recent.map { (wall($0.time), $0.value) }
            return Chart(name: series.name, points: points)
        }
    }
}

extension Int {
    fileprivate var nextPowerOfTwo: Int {
        var power = 1
        while power < self { power <<= 1 }
        return power
    }
}
