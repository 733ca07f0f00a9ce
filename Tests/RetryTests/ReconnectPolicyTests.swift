import Retry
import Testing

@Suite("Reconnect policy")
struct ReconnectPolicyTests {
    func delays(_ count: Int, seed: UInt64, failure: ReconnectPolicy<SplitMix64>.Failure = .connectionTimeout)
        -> [Double]
    {
        var policy = ReconnectPolicy(random: SplitMix64(seed: seed))
        var clock = 0.0
        return (0..<count).map { _ in
            guard case .retry(let delay) = policy.failed(failure, at: clock) else { return -1 }
            clock += delay
            return delay
        }
    }

    @Test(
        "the first retry comes after 1–5 s, then the delay grows and is capped at 60 s",
        arguments: [1, 2, 3, 99, 12345] as [UInt64])
    func backoffShape(seed: UInt64) {
        let series = delays(12, seed: seed)
        #expect((1...5).contains(series[0]))
        // The n-th delay stays within ±20 % of first · 2ⁿ⁻¹ (jitter does not compound), capped at 60 s.
        for (index, delay) in series.enumerated().dropFirst() {
            let base = min(60, series[0] * Double(1 << index))
            #expect(delay >= base * 0.8 - 1e-9 && delay <= min(60, base * 1.2) + 1e-9)
        }
        #expect(series.allSatisfy { $0 <= 60 })
        #expect(series.suffix(3).allSatisfy { $0 >= 30 }, "after many failures the delay sits near the cap")
    }

    @Test("jitter makes two gateways' schedules differ, and the same seed repeats exactly")
    func jitter() {
        #expect(delays(6, seed: 1) != delays(6, seed: 2))
        #expect(delays(6, seed: 7) == delays(6, seed: 7))
    }

    @Test("a dropped link after a stable connection starts again at 1–5 s")
    func resetsAfterStableConnection() {
        var policy = ReconnectPolicy(random: SplitMix64(seed: 5))
        for _ in 0..<6 { _ = policy.failed(.connectionTimeout, at: 0) }
        #expect(policy.attempt == 6)
        policy.connected(at: 100)
        guard case .retry(let delay) = policy.failed(.peripheralDisconnected, at: 100 + 31) else {
            Issue.record("expected a retry")
            return
        }
        #expect((1...5).contains(delay))
        #expect(policy.attempt == 1)
    }

    @Test("a link that drops quickly does not reset the backoff")
    func shortConnectionKeepsBackoff() {
        var policy = ReconnectPolicy(random: SplitMix64(seed: 5))
        var last = 0.0
        for _ in 0..<4 {
            if case .retry(let delay) = policy.failed(.connectionTimeout, at: 0) { last = delay }
        }
        policy.connected(at: 10)
        guard case .retry(let delay) = policy.failed(.peripheralDisconnected, at: 12) else {
            Issue.record("expected a retry")
            return
        }
        #expect(delay > last * 1.5)
    }

    @Test("operationNotSupported and permanent errors are never retried")
    func permanentFailures() {
        var policy = ReconnectPolicy(random: SplitMix64(seed: 1))
        #expect(policy.failed(.operationNotSupported, at: 0) == .giveUp)
        #expect(policy.failed(.other(retryable: false), at: 0) == .giveUp)
        if case .retry = policy.failed(.other(retryable: true), at: 0) {
        } else {
            Issue.record("retryable error not retried")
        }
    }
}
