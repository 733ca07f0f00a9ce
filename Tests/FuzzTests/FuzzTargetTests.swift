import Foundation
import FuzzTargets
import Testing

/// Every fuzz target in the ordinary test build: its seeds (the fixtures), its saved corpus
/// (`Tests/Fixtures/fuzz/NAME`: every crasher found, kept after the fix), then a seeded
/// mutational run. A trap or a broken property ends the test process, naming the target.
/// `make test-fuzz` runs the same targets coverage-guided (libFuzzer); `make fuzz` for longer.
///
/// Serialized, each on a thread of its own at the lowest priority: the runs are seconds of pure
/// CPU each, and forty of them at once (the targets' replays and mutational runs) left the rest
/// of the suite — hundreds of async tests on a 2-core machine — a twentieth of the CPU for half a
/// minute, so that their own waits and timeouts failed.
@Suite("Fuzz targets", .serialized)
struct FuzzTargetTests {
    @Test("every external input surface has a target with seeds")
    func inventory() {
        let names = Set(FuzzTargets.all.map(\.name))
        #expect(names.count == FuzzTargets.all.count, "target names are unique")
        for target in FuzzTargets.all { #expect(!target.seeds().isEmpty, "\(target.name) has no seeds") }
    }

    @Test("seeds and saved corpus replay without a trap", arguments: FuzzTargets.all.map(\.name))
    func replay(_ name: String) async throws {
        let target = try #require(FuzzTargets.named(name))
        await Self.onOwnThread {
            for input in target.seeds() { target.run(input) }
            for file in FixtureFiles.corpus(name) { target.run(file.bytes) }
        }
    }

    @Test("a seeded mutational run finds nothing", arguments: FuzzTargets.all.map(\.name))
    func mutations(_ name: String) async throws {
        let target = try #require(FuzzTargets.named(name))
        await Self.onOwnThread {
            let seeds = target.seeds()
            var mutator = Mutator(seed: 0x6761_7474)
            for _ in 0..<2000 { target.run(mutator.next(from: seeds)) }
        }
    }

    /// Runs `body` on a thread of its own at nice 19: fuzz callbacks are synchronous and run for
    /// seconds, and on the cooperative pool (two threads on a 2-core machine) they would starve
    /// the tests running beside them; at the lowest priority they take what those leave.
    static func onOwnThread(_ body: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                // Linux: the nice value is per thread; who 0 is the calling thread.
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
                body()
                continuation.resume()
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
    }
}
