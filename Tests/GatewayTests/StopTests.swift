import Bluetooth
import Foundation
import Gateway
import GatewayFakes
import JSON
import Testing
import TestSupport

/// ``Gateway/stop(timeout:)`` (docs/operations.md, "Stopping"): bounded whatever the broker and
/// bluetoothd do. The waits are on the manual clock: each test moves it and settles.
@Suite("Stopping: bounded")
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

    @Test("a connected broker that never acknowledges bridge/state offline (frozen): offline is sent once and stop() returns after offline_publish_timeout")
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
        #expect(capture.all.contains("<5>gateway stopped in 2.0 s: bridge/state offline not acknowledged within 2.0 s; 1 link disconnected\n"),
                "\(capture.all)")
    }

    @Test("the MQTT connection lost before the stop: bridge/state offline is handed to the port without waiting (the broker published the last will)")
    func brokerGone() async throws {
        let harness = try await Self.connected(hangDisconnect: false)
        harness.mqtt.holdAcknowledgements(true)
        await harness.gateway.handle(mqttConnected: false)
        let stop = await harness.beginStop()
        #expect(stop.returned, "nothing to wait for: the clock did not move")
        #expect(harness.mqtt.payloads(on: "gattway/bridge/state").last == Self.offline)
    }

    @Test("a Disconnect bluetoothd never answers (frozen): cancelled at the timeout, the link left to BlueZ, stop() returns then")
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
        #expect(capture.all.contains(
            "<5>gateway stopped in 3.0 s: bridge/state offline not acknowledged within 2.0 s; 1 link: Disconnect not answered within 3.0 s, cancelled (left to BlueZ)\n"),
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
}
