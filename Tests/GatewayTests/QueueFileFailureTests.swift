import Bluetooth
import Foundation
import Gateway
import GatewayFakes
import JSON
import TestSupport
import Testing

/// A state directory whose file system fills up or turns read-only under the gateway
/// (docs/operations.md, "When the queue file cannot be written"): small file systems mounted by
/// the test (root only; skipped with the reason otherwise).
@Suite("Store-and-forward: a queue file that cannot be written")
struct QueueFileFailureTests {
    static let state = "gattway/A4C138000001"

    func harness(_ directory: String, _ capture: LogCapture) throws -> Harness {
        try Harness(
            #"{"store_and_forward": {"max_messages": 1000}, "devices": [{"match": {"services": ["FCD2"]}}]}"#,
            logger: capture.logger, stateDirectory: directory)
    }

    /// The temperatures of the state messages the port received, in order.
    static func delivered(_ mqtt: InMemoryMQTT) -> [Double] {
        mqtt.messages(on: state).compactMap { message in
            if case .number(let value)? = json(message.payloadText)?["temperature"] { return value }
            return nil
        }
    }

    /// The temperatures of the state messages in a copy of the queue file, oldest first.
    static func inFile(_ path: String) throws -> [Double] {
        let copy = NSTemporaryDirectory() + "gattway-queue-copy-" + UUID().uuidString
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        let queue = try DiskQueue(
            path: copy, limits: DiskQueue.Limits(maxMessages: 10_000, maxBytes: 1 << 24, maxAge: 1e9))
        defer { queue.close() }
        return queue.oldest().filter { $0.message.topic == state }.compactMap { queued in
            if case .number(let value)? = json(String(decoding: queued.message.payload, as: UTF8.self))?["temperature"]
            {
                return value
            }
            return nil
        }
    }

    static func temperature(_ step: Int) -> Double { Double(2000 + step) / 100 }

    /// Moves the manual clock on in retry intervals until `condition` holds (settling the
    /// gateway after each: the retry is a timer of the core).
    static func advance(_ harness: Harness, until what: String, _ condition: () async -> Bool) async throws {
        for _ in 0..<200 {
            if await condition() { return }
            harness.clock.advance(by: StoreAndForward.retryInterval)
            await harness.settle()
        }
        Issue.record("\(what): not within 200 retry intervals")
    }

    /// The store-and-forward stage's counters now.
    static func statistics(_ harness: Harness) async -> StoreAndForward.Statistics {
        await harness.gateway.outboxStatistics ?? StoreAndForward.Statistics()
    }

    static func lines(_ capture: LogCapture, containing text: String) -> [String] {
        capture.all.filter { $0.contains(text) }
    }

    @Test(
        "disk full (a small tmpfs): logged once with what it means; health says not durable with the free bytes; freed, the file is written again by itself (logged once) and nothing is lost",
        .enabled(if: ScratchFileSystem.runsTmpfsTests, Comment(rawValue: ScratchFileSystem.unavailable ?? "")))
    func diskFull() async throws {
        let fs = try ScratchFileSystem(tmpfsBytes: 256 * 1024)
        let capture = LogCapture()
        let harness = try harness(fs.path, capture)
        try await harness.start()
        await harness.gateway.handle(mqttConnected: false)
        var step = 0
        for _ in 1...3 {
            step += 1
            await harness.gateway.handle(StoreAndForwardTests.reading(2000 + step))
        }
        #expect(await harness.gateway.outboxStatistics != nil)
        #expect((await Self.statistics(harness)).durable)
        #expect(try Self.inFile(fs.path + "/outbox.log") == (1...3).map(Self.temperature))

        let filler = try fs.fill()
        // The file's last page may still take a few records; then a write fails.
        while (await Self.statistics(harness)).durable, step < 200 {
            step += 1
            await harness.gateway.handle(StoreAndForwardTests.reading(2000 + step))
        }
        for _ in 1...20 {
            step += 1
            await harness.gateway.handle(StoreAndForwardTests.reading(2000 + step))
        }
        let failures = Self.lines(capture, containing: "store-and-forward: cannot write")
        #expect(failures.count == 1, "\(capture.all)")
        #expect(
            failures.first?.hasPrefix(
                "<3>store-and-forward: cannot write \(fs.path)/outbox.log (No space left on device): "
                    + "queue kept in memory only (lost if gattway stops), bounded by max_messages 1000 and max_bytes 16777216; "
                    + "trying the file again every 5 s") == true, "\(failures)")
        let statistics = (await Self.statistics(harness))
        #expect(!statistics.durable && statistics.memoryOnly >= 20 && statistics.writeErrors == 1, "\(statistics)")
        let health = await harness.gateway.healthPayload
        #expect(health["store_and_forward"]?["durable"] == .bool(false))
        #expect(health["store_and_forward"]?["memory_only"] == .number(Double(statistics.memoryOnly)))
        guard case .number(let free)? = health["store_and_forward"]?["free_bytes"] else {
            Issue.record("no free_bytes in \(health)")
            return
        }
        #expect(free < 8192, "a full 256 KiB tmpfs: \(free) bytes free")

        // Still full: the retry fails quietly.
        try await Self.advance(harness, until: "a failed retry") { (await Self.statistics(harness)).writeErrors >= 2 }
        #expect(!(await Self.statistics(harness)).durable)
        #expect(Self.lines(capture, containing: "store-and-forward:").count == 1, "\(capture.all)")

        // Freed: within a retry interval the whole queue is in the file again.
        try FileManager.default.removeItem(atPath: filler)
        let held = (await Self.statistics(harness)).memoryOnly
        try await Self.advance(harness, until: "the file written again") { (await Self.statistics(harness)).durable }
        let recoveries = Self.lines(capture, containing: "writing the queue file")
        #expect(
            recoveries.count == 1
                && recoveries.first?.hasPrefix(
                    "<5>store-and-forward: writing the queue file \(fs.path)/outbox.log again after ") == true,
            "\(capture.all)")
        #expect(recoveries.first?.hasSuffix(": \(held) messages moved from memory into it\n") == true, "\(recoveries)")
        #expect((await Self.statistics(harness)).memoryOnly == 0)
        #expect(await harness.gateway.healthPayload["store_and_forward"]?["durable"] == .bool(true))
        #expect(
            try Self.inFile(fs.path + "/outbox.log") == (1...step).map(Self.temperature),
            "every reading is in the file, in order")
        // Appends go to the file again.
        step += 1
        await harness.gateway.handle(StoreAndForwardTests.reading(2000 + step))
        let after = await Self.statistics(harness)
        #expect(after.memoryOnly == 0 && after.durable)

        harness.mqtt.clear()
        await harness.gateway.handle(mqttConnected: true)
        await harness.mqtt.waitFor(Self.state, count: step)
        #expect(Self.delivered(harness.mqtt) == (1...step).map(Self.temperature), "every reading once, in order")
        #expect(Self.lines(capture, containing: "cannot write").count == 1)
    }

    @Test(
        "an empty queue on a full disk stays not durable: the retry writes a record, which fails, until space comes back",
        .enabled(if: ScratchFileSystem.runsTmpfsTests, Comment(rawValue: ScratchFileSystem.unavailable ?? "")))
    func emptyQueueOnAFullDisk() throws {
        let fs = try ScratchFileSystem(tmpfsBytes: 64 * 1024)
        let queue = try DiskQueue(path: fs.path + "/outbox.log", limits: StoreAndForwardTests.limits)
        let filler = try fs.fill()
        var index = 0
        while queue.isDurable, index < 100 {
            queue.append(
                StoreAndForwardTests.message(index), capturedAt: StoreAndForwardTests.t0, now: StoreAndForwardTests.t0)
            index += 1
        }
        #expect(!queue.isDurable && queue.fileFailure?.code == ENOSPC)
        while let first = queue.firstSequence { queue.remove(first) }
        #expect(queue.isEmpty)
        #expect(!queue.retryFile(), "nothing queued, but the file still cannot be written")
        #expect(!queue.isDurable)
        try FileManager.default.removeItem(atPath: filler)
        #expect(queue.retryFile() && queue.isDurable && queue.fileFailure == nil)
        queue.append(StoreAndForwardTests.message(7), capturedAt: StoreAndForwardTests.t0, now: StoreAndForwardTests.t0)
        queue.close()
        let reopened = try DiskQueue(path: fs.path + "/outbox.log", limits: StoreAndForwardTests.limits)
        #expect(reopened.oldest().map(\.message) == [StoreAndForwardTests.message(7)])
        #expect(reopened.oldest().map(\.sequence) == [UInt64(index)], "sequences go on after the removed ones")
    }

    @Test(
        "a read-only state directory at start: the gateway starts, replays what the previous run left, keeps new readings in memory (logged once); remounted read-write, the file takes the queue again",
        .enabled(if: ScratchFileSystem.runsTmpfsTests, Comment(rawValue: ScratchFileSystem.unavailable ?? "")))
    func readOnlyAtStart() async throws {
        let fs = try ScratchFileSystem(tmpfsBytes: 256 * 1024)
        let path = fs.path + "/outbox.log"
        do {
            let previous = try DiskQueue(path: path, limits: StoreAndForwardTests.limits)
            for index in 0..<2 {
                previous.append(
                    StoreAndForwardTests.message(index), capturedAt: StoreAndForwardTests.t0,
                    now: StoreAndForwardTests.t0)
            }
            previous.close()
        }
        try fs.remount(readOnly: true)
        let capture = LogCapture()
        let harness = try harness(fs.path, capture)
        try await harness.start()
        #expect(await harness.gateway.outboxStatistics != nil)
        #expect(
            Self.lines(
                capture,
                containing:
                    "store-and-forward: cannot open \(path) for writing (Read-only file system): queue kept in memory only"
            ).count == 1,
            "\(capture.all)")
        #expect(
            Self.lines(capture, containing: "2 messages from the previous run to replay").count == 1, "\(capture.all)")
        // Connected at start: the previous run's messages are replayed from the read-only file.
        for index in 0..<2 { await harness.mqtt.waitFor("gattway/dev\(index)") }
        #expect(
            harness.mqtt.payloads(on: "gattway/dev0") == [#"{"n":0}"#]
                && harness.mqtt.payloads(on: "gattway/dev1") == [#"{"n":1}"#])
        await harness.gateway.handle(mqttConnected: false)
        for step in 1...3 { await harness.gateway.handle(StoreAndForwardTests.reading(2000 + step)) }
        let statistics = await Self.statistics(harness)
        #expect(!statistics.durable && statistics.memoryOnly >= 3, "\(statistics)")
        #expect(await harness.gateway.healthPayload["store_and_forward"]?["durable"] == .bool(false))

        try fs.remount(readOnly: false)
        try await Self.advance(harness, until: "the file written again") { (await Self.statistics(harness)).durable }
        #expect(Self.lines(capture, containing: "writing the queue file \(path) again").count == 1, "\(capture.all)")
        #expect(try Self.inFile(path) == (1...3).map(Self.temperature), "the new readings, not the delivered ones")
        harness.mqtt.clear()
        await harness.gateway.handle(mqttConnected: true)
        await harness.mqtt.waitFor(Self.state, count: 3)
        #expect(Self.delivered(harness.mqtt) == (1...3).map(Self.temperature))
        #expect(harness.mqtt.messages(on: "gattway/dev0").isEmpty, "delivered ones are not replayed again")
        #expect(
            Self.lines(capture, containing: "store-and-forward: cannot").count == 1,
            "one line for the whole episode: \(capture.all)")
    }

    @Test(
        "ext4 turning read-only under the open file (errors=remount-ro): EROFS logged once, the readings kept in memory and replayed in order",
        .enabled(
            if: ScratchFileSystem.runsExt4Tests, Comment(rawValue: ScratchFileSystem.ext4Unavailable ?? "")))
    func readOnlyUnderTheGateway() async throws {
        let fs = try await ScratchFileSystem(ext4Bytes: 4 << 20)
        let capture = LogCapture()
        let harness = try harness(fs.path, capture)
        try await harness.start()
        await harness.gateway.handle(mqttConnected: false)
        for step in 1...2 { await harness.gateway.handle(StoreAndForwardTests.reading(2000 + step)) }
        #expect(await harness.gateway.outboxStatistics != nil)
        #expect((await Self.statistics(harness)).durable)
        try fs.triggerError()
        for step in 3...6 { await harness.gateway.handle(StoreAndForwardTests.reading(2000 + step)) }
        let failures = Self.lines(capture, containing: "store-and-forward: cannot write")
        #expect(
            failures.count == 1
                && failures.first?.contains("(Read-only file system): queue kept in memory only") == true,
            "\(capture.all)")
        let statistics = await Self.statistics(harness)
        #expect(!statistics.durable && statistics.memoryOnly == 4, "\(statistics)")
        await harness.gateway.handle(mqttConnected: true)
        await harness.mqtt.waitFor(Self.state, count: 6)
        #expect(Self.delivered(harness.mqtt) == (1...6).map(Self.temperature))
    }

    @Test(
        "a setup mistake is not a full or read-only disk: a queue file path that cannot exist still fails the start, naming it"
    )
    func setupMistakeFails() throws {
        let file = NSTemporaryDirectory() + "gattway-not-a-dir-" + UUID().uuidString
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        defer { try? FileManager.default.removeItem(atPath: file) }
        #expect(throws: StoreAndForwardError.self) {
            try DiskQueue(path: file + "/outbox.log", limits: StoreAndForwardTests.limits)
        }
        do {
            _ = try DiskQueue(path: file + "/outbox.log", limits: StoreAndForwardTests.limits)
        } catch {
            #expect(error.message == "cannot open the store-and-forward queue \(file)/outbox.log: Not a directory")
        }
    }
}
