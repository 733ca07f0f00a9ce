/// What became of every value a ``CounterSensor`` sent: which arrived (and when), which never
/// did, and what else the subscriber saw.
///
/// The subscriber's messages are first stripped of QoS 1 redeliveries (the same message — value
/// and `last_seen` — again: the broker died before it saw the PUBACK) and of repeats (the same
/// value again right after itself with a new `last_seen`: a state the gateway republished, e.g.
/// after reading the environmental sensor's battery level on a reconnect). What is left must be
/// the sent values in order; each one missing is lost, anything else is unexpected (a value out
/// of order, or a duplicate that is not a redelivery).
struct SensorAccount: Sendable {
    var emitted = 0
    var delivered = 0
    var lost = 0
    var redeliveries = 0
    var repeats = 0
    var unexpected = 0
    /// Arrival (monotonic seconds) of each sent value, by its position; nil: never arrived.
    var arrivals: [Double?] = []
    /// A few of the lost and unexpected values, for the report.
    var examples: [String] = []

    init(emissions: [CounterSensor.Emission], readings: [SensorRecorder.Reading]) {
        emitted = emissions.count
        arrivals = Array(repeating: nil, count: emissions.count)
        var seen = Set<String>()
        var collapsed: [SensorRecorder.Reading] = []
        for reading in readings {
            guard seen.insert("\(reading.value) \(reading.lastSeen)").inserted else {
                redeliveries += 1
                continue
            }
            if collapsed.last?.value == reading.value {
                repeats += 1
            } else {
                collapsed.append(reading)
            }
        }
        var next = 0
        for reading in collapsed {
            if next < emissions.count, emissions[next].value == reading.value {
                arrivals[next] = reading.arrival
                next += 1
                continue
            }
            // A gap: the reading is a later one (the values between were lost): the first one
            // ahead with its value that was sent before it arrived. (Values repeat with the
            // counter's period; a value from before `next` is out of order.)
            let ahead = next..<emissions.count
            if let found = ahead.first(where: {
                emissions[$0].value == reading.value && emissions[$0].time <= reading.arrival
            }) {
                lost += found - next
                if examples.count < 10 {
                    examples.append("lost \(found - next) before value \(reading.value) (#\(found))")
                }
                arrivals[found] = reading.arrival
                next = found + 1
            } else {
                unexpected += 1
                if examples.count < 10 { examples.append("unexpected value \(reading.value) after #\(next - 1)") }
            }
        }
        if next < emissions.count {
            lost += emissions.count - next
            examples.append("the last \(emissions.count - next) never arrived")
        }
        delivered = arrivals.count { $0 != nil }
    }

    /// Runs the accounting on made-up sequences with each kind of damage and returns what it
    /// miscounted (empty: none), so a soak that reports 0 lost is known to be able to report more.
    static func selfTest() -> [String] {
        let sent = (0..<300).map { CounterSensor.Emission(value: $0 % 101, time: Double($0)) }
        func reading(_ index: Int, stamp: String? = nil) -> SensorRecorder.Reading {
            SensorRecorder.Reading(value: index % 101, lastSeen: stamp ?? "t\(index)", arrival: Double(index) + 0.5)
        }
        var problems: [String] = []
        func check(
            _ name: String, _ readings: [SensorRecorder.Reading], lost: Int, unexpected: Int, redeliveries: Int = 0,
            repeats: Int = 0
        ) {
            let account = SensorAccount(emissions: sent, readings: readings)
            if account.lost != lost || account.unexpected != unexpected || account.redeliveries != redeliveries
                || account.repeats != repeats
            {
                problems.append(
                    "\(name): lost \(account.lost) (expected \(lost)), unexpected \(account.unexpected) (\(unexpected)), "
                        + "redeliveries \(account.redeliveries) (\(redeliveries)), republished \(account.repeats) (\(repeats))"
                )
            }
        }
        let all = (0..<300).map { reading($0) }
        check("complete", all, lost: 0, unexpected: 0)
        check("three lost in the middle", all.filter { !(100..<103).contains(Int($0.arrival)) }, lost: 3, unexpected: 0)
        check("the last two never arrived", Array(all.dropLast(2)), lost: 2, unexpected: 0)
        check(
            "a redelivery", Array(all[..<150]) + [all[120]] + Array(all[150...]), lost: 0, unexpected: 0,
            redeliveries: 1)
        check(
            "republished with a new last_seen",
            Array(all[..<150]) + [reading(149, stamp: "again")] + Array(all[150...]),
            lost: 0, unexpected: 0, repeats: 1)
        check(
            "an old value again with a new last_seen",
            Array(all[..<150]) + [reading(120, stamp: "again")] + Array(all[150...]),
            lost: 0, unexpected: 1)
        check("two swapped", Array(all[..<150]) + [all[151], all[150]] + Array(all[152...]), lost: 1, unexpected: 1)
        return problems
    }

    /// Seconds from sending to arrival of the delivered values, sorted.
    func latencies(_ emissions: [CounterSensor.Emission]) -> [Double] {
        zip(arrivals, emissions).compactMap { arrival, emission in arrival.map { $0 - emission.time } }.sorted()
    }

    /// Seconds from `time` until the first value sent at or after it arrived (nil: none did).
    func recovery(after time: Double, emissions: [CounterSensor.Emission]) -> Double? {
        guard let first = emissions.firstIndex(where: { $0.time >= time }) else { return nil }
        for index in first..<emissions.count {
            if let arrival = arrivals[index] { return arrival - time }
        }
        return nil
    }
}
