import Bluetooth
import Testing

@testable import Gateway

/// Links the port reports up that the gateway did not make (left up by another client before
/// the start, or made by one since): only devices whose rule connects are taken over.
@Suite("Links already up: taken over without an advertisement")
struct LinkAdoptionTests {
    static let sensor = address("00:00:00:00:00:0A"), beacon = address("00:00:00:00:00:0B")

    @Test(
        "a connected device matching a connecting rule (by name, no advertisement) is registered and connected; one of an advertisement-only rule is not"
    )
    func connectingRulesOnly() async throws {
        let harness = try Harness(
            """
            {"devices": [{"match": {"name": "Sensor"}, "connect": true},
                         {"match": {"address": "00:00:00:00:00:0B"}, "name": "beacon"}]}
            """)
        harness.ble.add(Self.sensor, .init(characteristics: []))
        harness.ble.add(Self.beacon, .init(characteristics: []))
        try await harness.start()
        await harness.gateway.handle(
            .connected(BLEDiscovery(address: Self.sensor, advertisement: .init(localName: "Sensor"))))
        await harness.gateway.handle(.connected(BLEDiscovery(address: Self.beacon, advertisement: .init())))
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts == [Self.sensor])
        #expect(
            harness.mqtt.payloads(on: "gattway/bridge/event").contains { $0.contains(#""type":"device_connected""#) })
        // The gateway's own link coming up again (reported once more) starts nothing new.
        await harness.gateway.handle(
            .connected(BLEDiscovery(address: Self.sensor, advertisement: .init(localName: "Sensor"))))
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts == [Self.sensor])
    }

    @Test(
        "a link reported up after the gateway's attempt failed (it came up and dropped meanwhile) waits for the backoff"
    )
    func lateReportAfterFailure() async throws {
        let harness = try Harness(
            #"{"devices": [{"match": {"address": "00:00:00:00:00:0A"}, "name": "sensor", "connect": true}]}"#)
        harness.ble.add(
            Self.sensor, .init(characteristics: [], connectError: BLEPortError(.peripheralDisconnected, "link lost")))
        try await harness.start()
        await harness.gateway.handle(BLEDiscovery(address: Self.sensor, advertisement: .init(rssi: -50)))
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts == [Self.sensor])
        harness.ble.update(Self.sensor) { $0.connectError = nil }
        await harness.gateway.handle(.connected(BLEDiscovery(address: Self.sensor, advertisement: .init())))
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts == [Self.sensor])
        await harness.advance(6)
        await harness.gateway.waitUntilIdle()
        #expect(harness.ble.connectAttempts == [Self.sensor, Self.sensor])
    }
}
