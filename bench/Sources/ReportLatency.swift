import BlueZSimulator

/// Report-to-MQTT latency: from the simulator's turn that sent an advertising report (its record,
/// ``ReportTime``) to the subscriber's receipt of the message it became. A message names its
/// report by its topic (the device, `A4C1385A0001`) and the frame counter in its payload, which
/// the realistic workload's thermometers step by one per report from 0 (mod 256): the report of
/// that device whose ``ReportTime/sequence`` gives that counter, the latest sent before the
/// message arrived. Messages whose report was sent before the recording started are not matched.
struct ReportLatency {
    /// Messages received while recording, and those matched to a report.
    var messages = 0
    var matched = 0
    /// Milliseconds.
    var p50 = 0.0
    var p99 = 0.0
    var max = 0.0

    init() {}

    init(reports: [ReportTime], arrivals: [CountingSubscriber.Arrival], counterModulo: Int = 256) {
        messages = arrivals.count
        var sent: [String: [UInt64]] = [:]
        for report in reports {
            let device = report.address.description.replacingOccurrences(of: ":", with: "").uppercased()
            sent["\(device)#\(report.sequence % counterModulo)", default: []].append(report.sent)
        }
        var latencies: [Double] = []
        latencies.reserveCapacity(arrivals.count)
        for arrival in arrivals {
            guard let times = sent["\(arrival.device)#\(arrival.counter)"],
                let at = times.last(where: { $0 <= arrival.at }), arrival.at - at < 5_000_000_000
            else { continue }
            latencies.append(Double(arrival.at - at) / 1e6)
        }
        matched = latencies.count
        guard !latencies.isEmpty else { return }
        latencies.sort()
        func quantile(_ q: Double) -> Double { latencies[Int((Double(latencies.count - 1) * q).rounded())] }
        p50 = quantile(0.5)
        p99 = quantile(0.99)
        max = latencies[latencies.count - 1]
    }

    var summary: String {
        messages == 0
            ? "no messages"
            : "p50 \(p50.formatted(2)) ms, p99 \(p99.formatted(2)) ms, max \(max.formatted(1)) ms; "
                + "\(matched) of \(messages) messages matched to their report"
    }
}
