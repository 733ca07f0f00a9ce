import BlueZSimulator

/// The advertising interval that gives `count` advertisers `rate` reports a second in total: the
/// simulator adds advDelay (0–10 ms, 5 ms on average) to every interval (docs/simulator.md,
/// "Advertising timing"); aligned advertisers have none.
func advertisingInterval(advertisers count: Int, rate: Double, aligned: Bool = false) -> Double {
    Double(count) / rate - (aligned ? 0 : DeviceSpec.maxAdvertisingDelay / 2)
}

/// How a workload's advertising reports were spread over time, from the simulator's record
/// (``BlueZSimulator/startRecordingReports()``): reports sent in one turn of its loop leave in
/// one flush and reach the gateway together, as a radio's simultaneous reports would not.
struct ReportSpread {
    var reports = 0
    /// Loop turns that sent reports, and the most reports one of them sent.
    var turns = 0
    var largestTurn = 0
    /// Time from one report to the next, by bucket: the same turn, then up to 1 ms, 1–5 ms,
    /// 5–20 ms, 20 ms or more.
    var gaps = [Int](repeating: 0, count: 5)
    static let gapLabels = ["same turn", "< 1 ms", "1–5 ms", "5–20 ms", "≥ 20 ms"]
    /// The median gap between reports, milliseconds.
    var medianGap = 0.0

    init(_ times: [ReportTime]) {
        let sent = times.map(\.sent).sorted()
        reports = sent.count
        guard !sent.isEmpty else { return }
        var run = 1
        turns = 1
        largestTurn = 1
        var gapSeconds: [Double] = []
        for (previous, next) in zip(sent, sent.dropFirst()) {
            let gap = Double(next - previous) / 1e9
            gapSeconds.append(gap)
            let bucket = gap == 0 ? 0 : gap < 0.001 ? 1 : gap < 0.005 ? 2 : gap < 0.020 ? 3 : 4
            gaps[bucket] += 1
            if gap == 0 {
                run += 1
            } else {
                turns += 1
                run = 1
            }
            largestTurn = max(largestTurn, run)
        }
        gapSeconds.sort()
        medianGap = gapSeconds.isEmpty ? 0 : gapSeconds[gapSeconds.count / 2] * 1000
    }

    var reportsPerTurn: Double { turns > 0 ? Double(reports) / Double(turns) : 0 }

    /// "same turn 0.0 %, < 1 ms 3.1 %, …": the share of each bucket of gaps.
    var histogram: String {
        let total = max(1, gaps.reduce(0, +))
        return zip(Self.gapLabels, gaps).map { "\($0) \((Double($1) * 100 / Double(total)).formatted(1)) %" }
            .joined(separator: ", ")
    }

    var summary: String {
        "\(reports) reports in \(turns) loop turns (at most \(largestTurn) in one); gaps between reports: "
            + "\(histogram); median gap \(medianGap.formatted(2)) ms"
    }
}
