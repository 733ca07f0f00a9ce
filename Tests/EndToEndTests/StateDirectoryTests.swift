import Foundation
import JSON
import TestSupport
import Testing

/// `gattway run` with its state directory on a small tmpfs that fills up, or is read-only, while
/// the broker is away (docs/operations.md, "When the queue file cannot be written"): what the log,
/// `bridge/health` and a QoS 1 subscriber see. Mounting needs root; skipped with the reason
/// otherwise (``ScratchFileSystem/runsTmpfsTests``).
///
/// A persistent QoS 1 subscriber may get a reading twice (at least once: MQTT's redelivery of the
/// same message when the broker stops between its delivery and the acknowledgement), never out
/// of order and never with a gap (``StoreAndForwardTests/expectChain(_:sourceLocation:)``).
@Suite("End to end: a full or read-only state directory")
struct StateDirectoryTests {
    @Test(
        "the disk fills during a broker outage: logged once, health says not durable with the free bytes, writing resumes by itself once freed, and every reading arrives at least once, in order",
        .enabled(if: ScratchFileSystem.runsTmpfsTests, Comment(rawValue: ScratchFileSystem.unavailable ?? "")))
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

    @Test(
        "a read-only state directory at the start, then a broker outage: logged once with the memory bound, health says not durable, writing resumes by itself once it is read-write, and every reading arrives at least once, in order",
        .enabled(if: ScratchFileSystem.runsTmpfsTests, Comment(rawValue: ScratchFileSystem.unavailable ?? "")))
    func readOnly() async throws {
        let fs = try ScratchFileSystem(tmpfsBytes: 256 * 1024, readOnly: true)
        let config = StoreAndForwardTests.config(stateDirectory: fs.path)
        try await EndToEnd.run(config: config, broker: StoreAndForwardTests.persistentBroker) { e2e in
            try await StoreAndForwardTests.withSubscriber(e2e) { recorder in
                let degraded = try await e2e.messages.next(on: "gattway/bridge/health", timeout: 30) {
                    $0.json?["store_and_forward"]?["durable"] != nil
                }
                #expect(degraded.json?["store_and_forward"]?["durable"] == .bool(false), "\(degraded.text)")
                try await StoreAndForwardTests.waitForReadings(recorder, count: 3, after: 0)
                try await StoreAndForwardTests.waitForPacedReading(recorder)
                let before = recorder.count
                e2e.broker.stop()
                var produced = try await StoreAndForwardTests.waitForNotifications(e2e, count: 8)

                // Read-write again: within the retry interval the queue held in memory goes into
                // the file, and what comes next is written as it is queued.
                try fs.remount(readOnly: false)
                try await e2e.gateway.waitForOutput(
                    containing: "store-and-forward: writing the queue file", timeout: 30)
                let moved = StoreAndForwardTests.count(
                    in: e2e.gateway.log(), before: " messages moved from memory into it", after: " s: ")
                // One or two readings may have gone to the MQTT client before the gateway saw the
                // broker go; those are not in the queue.
                #expect((moved ?? 0) >= produced - 2, "\(moved ?? -1) moved, \(produced) produced")
                let queueFile = fs.path + "/outbox.log"
                let stored = try await StoreAndForwardTests.waitForNotifications(e2e, count: 3)
                produced += stored
                #expect(StoreAndForwardTests.lastStoredBattery(queueFile) != nil, "nothing in \(queueFile)")

                let mark = e2e.messages.count
                try await e2e.broker.start()
                let durable = try await e2e.messages.next(on: "gattway/bridge/health", after: mark, timeout: 30) {
                    $0.json?["store_and_forward"]?["durable"] != nil
                }
                #expect(durable.json?["store_and_forward"]?["durable"] == .bool(true), "\(durable.text)")
                #expect(durable.json?["store_and_forward"]?["memory_only"] == .number(0), "\(durable.text)")

                // Everything from the outage, then live readings.
                try await StoreAndForwardTests.waitForReadings(
                    recorder, count: produced + 5, after: before, timeout: 30)
                StoreAndForwardTests.expectChain(StoreAndForwardTests.readings(recorder))
                let log = e2e.gateway.log().split(separator: "\n")
                let failures = log.filter { $0.contains("queue kept in memory only") }
                #expect(failures.count == 1, "\(failures)")
                #expect(
                    failures.first?.contains(
                        "store-and-forward: cannot open \(queueFile) for writing (Read-only file system): queue kept in "
                            + "memory only (lost if gattway stops), bounded by max_messages 100000 and max_bytes 16777216"
                    )
                        == true,
                    "\(failures)")
                #expect(log.filter { $0.contains("writing the queue file") }.count == 1)
                // The connection the gateway made could not be saved for a crash either: said
                // once, however many changes tried meanwhile.
                let unsaved = log.filter { $0.contains("central.json: ") && $0.contains("kept in memory only") }
                #expect(unsaved.count == 1, "\(unsaved)")
                #expect(unsaved.first?.contains("Read-only file system") == true, "\(unsaved)")
            }
        }
    }
}
