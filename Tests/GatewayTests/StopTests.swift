import Bluetooth
import Foundation
import GatewayFakes
import JSON
import TestSupport
import Testing

@testable import Gateway

/// ``Gateway/stop(timeout:)`` (docs/operations.md, "Stopping"): bounded whatever the broker and
/// bluetoothd do, and nothing the store-and-forward stage accepted is left only in memory when
/// it can be written. The waits are on the manual clock: each test moves it and settles.
@Suite("Stopping: bounded, and what lived in memory written to the queue file")
struct StopTests {
    static let sensor = address("A4:C1:38:00:00:01")
    static let state = "gattway/A4C138000001"
    static let online = #"{"state":"online"}"#
    static let offline = #"{"state":"offline"}"#

    static let linkConfig = #"{"devices": [{"match": {"address": "A4:C1:38:00:00:01"}, "connect": true}]}"#

    /// A gateway connected to the sensor (whose Disconnect hangs with `hangDisconnect`).
    static func connected(hangDisconnect: Bool, logger: GatewayLogger = .none) async throws -> Harness {
        let harness = try Harness(linkConfig, logger: logger)
        harness.ble.add(sensor, InMemoryBLE.Peripheral(characteristics: [], hangDisconnect: hangDisconnect))
        try await harness.start()
        await harness.gateway.handle(BLEDiscovery(address: sensor, advertisement: AdvertisementData(rssi: -50)))
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts == [sensor])
        return harness
    }

    /// Moves the clock by `seconds` and settles (what the stop waits for is on the clock).
    static func advance(_ harness: Harness, _ seconds: Double) async {
        harness.clock.advance(by: seconds)
        await harness.settle()
    }

    // MARK: Bounded

    @Test(
        "a connected broker that never acknowledges bridge/state offline (frozen): offline is sent once and stop() returns after offline_publish_timeout"
    )
    func frozenBroker() async throws {
        let capture = LogCapture()
        let harness = try await Self.connected(hangDisconnect: false, logger: capture.logger)
        harness.mqtt.holdAcknowledgements(true)
        let stop = await harness.beginStop()
        #expect(harness.mqtt.payloads(on: "gattway/bridge/state") == [Self.online, Self.offline], "tried once")
        #expect(harness.ble.log.contains("disconnect \(Self.sensor)"), "the link ends meanwhile")
        await Self.advance(harness, Gateway.offlinePublishTimeout - 0.1)
        #expect(!stop.returned)
        await Self.advance(harness, 0.1)
        #expect(stop.returned, "stop() waits for the acknowledgement at most \(Gateway.offlinePublishTimeout) s")
        #expect(
            capture.all.contains(
                "<5>gateway stopped in 2.0 s: bridge/state offline not acknowledged within 2.0 s; 1 link disconnected\n"
            ),
            "\(capture.all)")
    }

    @Test(
        "the MQTT connection lost before the stop: bridge/state offline is handed to the port without waiting (the broker published the last will)"
    )
    func brokerGone() async throws {
        let harness = try await Self.connected(hangDisconnect: false)
        harness.mqtt.holdAcknowledgements(true)
        await harness.gateway.handle(mqttConnected: false)
        let stop = await harness.beginStop()
        #expect(stop.returned, "nothing to wait for: the clock did not move")
        #expect(harness.mqtt.payloads(on: "gattway/bridge/state").last == Self.offline)
    }

    @Test(
        "a Disconnect bluetoothd never answers (frozen): cancelled at the timeout, the link left to BlueZ, stop() returns then"
    )
    func frozenBluetoothd() async throws {
        let capture = LogCapture()
        let harness = try await Self.connected(hangDisconnect: true, logger: capture.logger)
        // The broker does not answer either: both waits run at once, not one after the other.
        harness.mqtt.holdAcknowledgements(true)
        let stop = await harness.beginStop(timeout: 3)
        #expect(harness.ble.log.last == "disconnect-begin \(Self.sensor)")
        await Self.advance(harness, 2.9)
        #expect(!stop.returned)
        await Self.advance(harness, 0.1)
        #expect(stop.returned)
        #expect(harness.ble.log.last == "disconnect-cancelled \(Self.sensor)", "\(harness.ble.log)")
        #expect(
            capture.all.contains(
                "<5>gateway stopped in 3.0 s: bridge/state offline not acknowledged within 2.0 s; 1 link: Disconnect not answered within 3.0 s, cancelled (left to BlueZ)\n"
            ),
            "\(capture.all)")
    }

    @Test("a timeout shorter than offline_publish_timeout bounds the offline wait too")
    func shortTimeout() async throws {
        let harness = try await Self.connected(hangDisconnect: true)
        harness.mqtt.holdAcknowledgements(true)
        let stop = await harness.beginStop(timeout: 0.5)
        await Self.advance(harness, 0.5)
        #expect(stop.returned)
    }

    // MARK: What lived in memory

    @Test(
        "DiskQueue: messages with reserved sequences put ahead of the queue are in memory until persist() writes them before it; a reopen reads them first; one that would break the order is left out"
    )
    func prependAndPersist() throws {
        let path = StoreAndForwardTests.temporaryDirectory() + "/outbox.log"
        let message = { (index: Int) in StoreAndForwardTests.message(index) }
        let t0 = StoreAndForwardTests.t0
        let queue = try DiskQueue(path: path, limits: StoreAndForwardTests.limits)
        let live = (0..<3).map {
            QueuedMessage(message: message($0), capturedAt: t0 + Int64($0), sequence: queue.reserveSequence())
        }
        queue.append(message(3), capturedAt: t0 + 3, now: t0 + 3)
        queue.append(message(4), capturedAt: t0 + 4, now: t0 + 4)
        let stray = QueuedMessage(message: message(9), capturedAt: t0 + 9, sequence: queue.reserveSequence())
        // live[0] was acknowledged; the stray one's sequence is above the queued ones.
        #expect(queue.prepend([live[1], live[2], stray]) == 2)
        #expect(queue.count == 4 && queue.memoryOnlyCount == 2)
        #expect(queue.oldest().map(\.message) == (1...4).map { message($0) })
        #expect(queue.persist())
        #expect(queue.memoryOnlyCount == 0 && queue.isDurable)
        queue.close()
        let reopened = try DiskQueue(path: path, limits: StoreAndForwardTests.limits)
        #expect(reopened.discardedBytes == 0)
        #expect(reopened.oldest().map(\.message) == (1...4).map { message($0) })
        #expect(reopened.oldest().map(\.capturedAt) == (1...4).map { t0 + Int64($0) })
        reopened.append(message(5), capturedAt: t0 + 5, now: t0 + 5)
        #expect(reopened.oldest().map(\.message) == (1...5).map { message($0) })
    }

    static let storedConfig =
        #"{"store_and_forward": {"max_messages": 1000}, "devices": [{"match": {"services": ["FCD2"]}}]}"#

    static func reading(_ step: Int) -> BLEDiscovery { StoreAndForwardTests.reading(2000 + step) }
    static func temperature(_ step: Int) -> JSONValue { .number(Double(2000 + step) / 100) }

    /// The temperatures of the state messages the port got.
    static func temperatures(_ mqtt: InMemoryMQTT) -> [JSONValue?] {
        mqtt.messages(on: state).map { json($0.payloadText)?["temperature"] }
    }

    /// A second run on the same state directory: what it replays at start.
    static func nextStart(_ directory: String) async throws -> Harness {
        let next = try Harness(storedConfig, stateDirectory: directory)
        try await next.start()
        await next.settle()
        return next
    }

    @Test(
        "the broker gone with readings in flight: those it had not acknowledged are written ahead of the queue at the stop, and the next start replays them first, in order, with their capture times"
    )
    func inFlightWrittenAhead() async throws {
        let directory = StoreAndForwardTests.temporaryDirectory()
        let capture = LogCapture()
        let first = try Harness(Self.storedConfig, logger: capture.logger, stateDirectory: directory)
        try await first.start()
        first.mqtt.holdAcknowledgements(true)
        for step in 1...3 {
            await first.advance(1)
            await first.gateway.handle(Self.reading(step))
        }
        // bridge/event device_seen and the first state acknowledged; states 2 and 3 not.
        first.mqtt.acknowledge(2)
        await first.settle()
        #expect(await first.gateway.outboxStatistics?.unacknowledged == 2)
        await first.gateway.handle(mqttConnected: false)
        for step in 4...5 {
            await first.advance(1)
            await first.gateway.handle(Self.reading(step))
        }
        #expect(await first.gateway.outboxStatistics?.depth == 2)
        let stop = await first.beginStop()
        #expect(stop.returned)
        #expect(
            capture.all.contains {
                $0
                    == "<5>store-and-forward: wrote 2 messages the broker had not acknowledged (ahead of the 2 queued) to \(directory)/outbox.log: "
                    + "the next start replays the 4 queued messages in order\n"
            }, "\(capture.all.filter { $0.contains("store-and-forward") })")

        let next = try await Self.nextStart(directory)
        let replayed = next.mqtt.messages(on: Self.state)
        #expect(Self.temperatures(next.mqtt) == (2...5).map(Self.temperature))
        #expect(
            replayed.map(\.capturedAt) == (2...5).map { StoreAndForwardTests.t0 + Int64($0) * 1000 },
            "captured when read, not at the stop")
        #expect(
            replayed.map { json($0.payloadText)?["last_seen"] }
                == (2...5).map { .string("2026-11-30T17:00:0\($0).000Z") })
        let statistics = await next.gateway.outboxStatistics
        #expect(statistics?.depth == 0, "\(String(describing: statistics)) \(next.mqtt.published.map(\.topic))")
    }

    @Test(
        "a frozen broker: what it acknowledges while the stop waits for bridge/state offline is not written; the rest is, and replayed at the next start"
    )
    func acknowledgedDuringTheStop() async throws {
        let directory = StoreAndForwardTests.temporaryDirectory()
        let first = try Harness(Self.storedConfig, stateDirectory: directory)
        try await first.start()
        first.mqtt.holdAcknowledgements(true)
        for step in 1...4 { await first.gateway.handle(Self.reading(step)) }
        #expect(await first.gateway.outboxStatistics?.unacknowledged == 5, "bridge/event device_seen and four states")
        let stop = await first.beginStop()
        #expect(!stop.returned)
        first.mqtt.acknowledge(3)  // the event, states 1 and 2
        await first.settle()
        await Self.advance(first, Gateway.offlinePublishTimeout)
        #expect(stop.returned)
        let next = try await Self.nextStart(directory)
        #expect(Self.temperatures(next.mqtt) == [Self.temperature(3), Self.temperature(4)])
    }

    @Test(
        "the queue file is written as soon as the offline wait is over, while a Disconnect bluetoothd does not answer is still awaited"
    )
    func writtenWhileLinksEnd() async throws {
        let directory = StoreAndForwardTests.temporaryDirectory()
        let linked = address("A4:C1:38:00:00:02")
        let harness = try Harness(
            """
            {"store_and_forward": {"max_messages": 1000},
             "devices": [{"match": {"address": "A4:C1:38:00:00:02"}, "connect": true}, {"match": {"services": ["FCD2"]}}]}
            """, stateDirectory: directory)
        harness.ble.add(linked, InMemoryBLE.Peripheral(characteristics: [], hangDisconnect: true))
        try await harness.start()
        await harness.gateway.handle(BLEDiscovery(address: linked, advertisement: AdvertisementData(rssi: -50)))
        await harness.gateway.waitUntilIdle()
        harness.mqtt.holdAcknowledgements(true)
        for step in 1...2 { await harness.gateway.handle(Self.reading(step)) }
        await harness.gateway.handle(mqttConnected: false)
        let stop = await harness.beginStop()
        #expect(!stop.returned, "the Disconnect is awaited")
        #expect(try QueueFileFailureTests.inFile(directory + "/outbox.log") == [20.01, 20.02])
        await Self.advance(harness, Gateway.stopTimeout)
        #expect(stop.returned)
    }

    @Test(
        "QoS 0 readings and republished topics are not kept for the stop; without a state directory nothing is, and the queued messages lost at the stop are logged"
    )
    func notKept() async throws {
        let qos0 = try Harness(
            #"{"mqtt": {"qos": 0}, "devices": [{"match": {"services": ["FCD2"]}}]}"#,
            stateDirectory: StoreAndForwardTests.temporaryDirectory())
        try await qos0.start()
        qos0.mqtt.holdAcknowledgements(true)
        await qos0.gateway.handle(Self.reading(1))
        #expect(await qos0.gateway.outboxStatistics?.unacknowledged == 0)
        #expect(qos0.mqtt.unacknowledged == 0, "QoS 0 goes out without a completion")

        let capture = LogCapture()
        let memory = try Harness(Self.storedConfig, logger: capture.logger)
        try await memory.start()
        memory.mqtt.holdAcknowledgements(true)
        await memory.gateway.handle(Self.reading(1))
        #expect(await memory.gateway.outboxStatistics?.unacknowledged == 0)
        await memory.gateway.handle(mqttConnected: false)
        for step in 2...4 { await memory.gateway.handle(Self.reading(step)) }
        _ = await memory.beginStop()
        #expect(
            capture.all.contains(
                "<4>store-and-forward: 3 queued messages are lost: without a state directory the queue is in memory only\n"
            ), "\(capture.all)")
    }

    @Test(
        "disk full, then space freed before the stop's own retry: the readings kept in memory are written at the stop and replayed at the next start",
        .enabled(if: ScratchFileSystem.runsTmpfsTests, Comment(rawValue: ScratchFileSystem.unavailable ?? "")))
    func episodeWrittenAtStop() async throws {
        let fs = try ScratchFileSystem(tmpfsBytes: 256 * 1024)
        let (first, step, filler) = try await Self.fillDisk(fs)
        #expect((await first.gateway.outboxStatistics?.memoryOnly ?? 0) >= 20)
        try FileManager.default.removeItem(atPath: filler)
        _ = await first.beginStop()
        let next = try await Self.nextStart(fs.path)
        #expect(Self.temperatures(next.mqtt) == (1...step).map(Self.temperature), "every reading once, in order")
    }

    @Test(
        "disk still full at the stop: the readings kept only in memory are lost, and the stop says so",
        .enabled(if: ScratchFileSystem.runsTmpfsTests, Comment(rawValue: ScratchFileSystem.unavailable ?? "")))
    func episodeLostAtStop() async throws {
        let fs = try ScratchFileSystem(tmpfsBytes: 256 * 1024)
        let capture = LogCapture()
        let (first, _, _) = try await Self.fillDisk(fs, logger: capture.logger)
        let held = await first.gateway.outboxStatistics?.memoryOnly ?? 0
        _ = await first.beginStop()
        let lost = capture.all.filter { $0.contains("kept only in memory are lost") }
        #expect(
            lost.count == 1 && lost.first?.hasPrefix("<3>store-and-forward: cannot ") == true
                && lost.first?.hasSuffix(
                    ": \(held) messages kept only in memory are lost (0 not acknowledged by the broker)\n") == true,
            "\(capture.all)")
    }

    /// A gateway whose broker went away queueing readings until its state directory is full and
    /// 20 more are kept in memory; returns it, the last reading's step and the filler file.
    static func fillDisk(_ fs: ScratchFileSystem, logger: GatewayLogger = .none) async throws -> (Harness, Int, String)
    {
        let harness = try Harness(storedConfig, logger: logger, stateDirectory: fs.path)
        try await harness.start()
        await harness.gateway.handle(mqttConnected: false)
        var step = 0
        for _ in 1...3 {
            step += 1
            await harness.gateway.handle(Self.reading(step))
        }
        let filler = try fs.fill()
        while (await harness.gateway.outboxStatistics)?.durable == true, step < 200 {
            step += 1
            await harness.gateway.handle(Self.reading(step))
        }
        for _ in 1...20 {
            step += 1
            await harness.gateway.handle(Self.reading(step))
        }
        return (harness, step, filler)
    }
}
