import Retry
import Testing

@Suite("Exponential backoff")
struct ExponentialBackoffTests {
    @Test("without jitter delays double from the first and stop at the maximum; a reset starts over")
    func doubling() {
        var backoff = ExponentialBackoff(.init(first: 1...1, multiplier: 2, maximum: 10, jitter: 0))
        #expect((0..<6).map { _ in backoff.next(random: 0.5) } == [1, 2, 4, 8, 10, 10])
        backoff.reset()
        #expect(backoff.next(random: 0.5) == 1)
    }

    @Test("jitter spreads each delay around its base without compounding")
    func jitter() {
        var backoff = ExponentialBackoff(.init(first: 1...1, multiplier: 2, maximum: 10, jitter: 0.25))
        #expect(backoff.next(random: 0) == 0.75)
        #expect(backoff.next(random: 0) == 1.5)
        #expect(backoff.next(random: 0.999_999) > 4.99)
        #expect(backoff.next(random: 0.5) == 8)
    }

    @Test("a ranged first delay is drawn from the range and sets the base of the rest")
    func rangedFirst() {
        var backoff = ExponentialBackoff(.init(first: 1...5, multiplier: 2, maximum: 60, jitter: 0.2))
        #expect(backoff.next(random: 0.5) == 3)
        #expect(backoff.next(random: 0.5) == 6)
        #expect(backoff.next(random: 0.5) == 12)
    }

    @Test("thousands of failures stay at the cap and cost nothing")
    func manyFailures() {
        var backoff = ExponentialBackoff(.init(first: 0.5...0.5, multiplier: 2, maximum: 30, jitter: 0.1))
        var last = 0.0
        for _ in 0..<100_000 { last = backoff.next(random: 0.5) }
        #expect(last == 30)
        #expect(backoff.failures == 100_000)
    }

    @Test(
        "invalid configurations are recognised",
        arguments: [
            ExponentialBackoff.Configuration(first: 0...1, maximum: 10),
            ExponentialBackoff.Configuration(first: 1...20, maximum: 10),
            ExponentialBackoff.Configuration(first: 1...1, multiplier: 0.5, maximum: 10),
            ExponentialBackoff.Configuration(first: 1...1, maximum: 10, jitter: 2),
        ])
    func invalid(configuration: ExponentialBackoff.Configuration) {
        #expect(!configuration.isValid)
    }
}
