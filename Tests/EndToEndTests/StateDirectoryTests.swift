import Foundation
import JSON
import TestSupport
import Testing

/// `gattway run` with its state directory on a small tmpfs that fills up while the broker is away
/// (docs/operations.md, "When the queue file cannot be written"): what the log, `bridge/health`
/// and a QoS 1 subscriber see. Mounting needs root; skipped with the reason otherwise.
@Suite("End to end: a full state directory")
struct StateDirectoryTests {
    @Test(
        "the disk fills during a broker outage: logged once, health says not durable with the free bytes, writing resumes by itself once freed, and every reading arrives once, in order",
        .enabled(if: ScratchFileSystem.unavailable == nil, Comment(rawValue: ScratchFileSystem.unavailable ?? "")))
    func fullDuringOutage() async throws {
        let fs = try ScratchFileSystem(tmpfsBytes: 256 * 1024)
        let config = StoreAndForwardTests.config(stateDirectory: fs.path)
        try await EndToEnd.run(config: config, broker: StoreAndForwardTests.persistentBroker) { e2e in
            try await StoreAndForwardTests.withSubscriber(e2e) { recorder in
                try await StoreAndForwardTests.waitForReadings(recorder, count: 3, after: 0)
                try await StoreAndForwardTests.waitForPacedReading(recorder)
                let before = recorder.count
                e2e.broker.stop()
                var produced = try await StoreAndForwardTests.waitForNotifications(e2e, count: 5)
                let filler = try fs.fill()
                try await e2e.gateway.waitForOutput(containing: "store-and-forward: cannot write", timeout: 30)
                produced += try await StoreAndForwardTests.waitForNotifications(e2e, count: 8)

                // The broker back, the disk still full: the queue drains from the file and from
                // memory; the file is still not durable.
                let mark = e2e.messages.count
                try await e2e.broker.start()
                let degraded = try await e2e.messages.next(on: "gattway/bridge/health", after: mark, timeout: 30) {
                    $0.json?["store_and_forward"]?["durable"] == .bool(false)
                }
                guard case .number(let free)? = degraded.json?["store_and_forward"]?["free_bytes"] else {
                    Issue.record("no store_and_forward.free_bytes in \(degraded.text)")
                    return
                }
                #expect(free < 16 * 1024, "a full 256 KiB tmpfs: \(degraded.text)")

                try FileManager.default.removeItem(atPath: filler)
                try await e2e.gateway.waitForOutput(
                    containing: "store-and-forward: writing the queue file", timeout: 30)
                let healed = e2e.messages.count
                let durable = try await e2e.messages.next(on: "gattway/bridge/health", after: healed, timeout: 30) {
                    $0.json?["store_and_forward"]?["durable"] == .bool(true)
                }
                #expect(durable.json?["store_and_forward"]?["memory_only"] == .number(0), "\(durable.text)")

                // Everything from the outage, then live readings.
                try await StoreAndForwardTests.waitForReadings(
                    recorder, count: produced + 5, after: before, timeout: 30)
                StoreAndForwardTests.expectChain(StoreAndForwardTests.readings(recorder))
                let log = e2e.gateway.log()
                let failures = log.split(separator: "\n").filter { $0.contains("store-and-forward: cannot write") }
                #expect(failures.count == 1, "\(failures)")
                #expect(
                    failures.first?.contains(
                        "\(fs.path)/outbox.log (No space left on device): queue kept in memory only") == true,
                    "\(failures)")
                #expect(log.split(separator: "\n").filter { $0.contains("writing the queue file") }.count == 1)
            }
        }
    }
}
