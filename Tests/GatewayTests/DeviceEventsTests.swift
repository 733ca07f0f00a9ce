import Bluetooth
import Gateway
import GatewayFakes
import Synchronization
import Testing

@Suite("The web page's event stream: the core marks each device's latest state and availability")
struct DeviceEventsTests {
    static let config = """
        {"mqtt": {"server": "mqtt://127.0.0.1:1883", "retain": true}, "bluetooth": {"scan": {"services": []}},
         "devices": [{"match": {"services": ["FCD2"]}, "connect": false}]}
        """

    /// How often the core said an interval's first event came.
    final class Firsts: Sendable {
        let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
    }

    /// A BTHome v2 temperature of `centi` hundredths of a degree.
    static func reading(_ address: BluetoothAddress, _ centi: UInt16) -> BLEDiscovery {
        bthome(address, payload: [0x40, 0x02, UInt8(centi & 0xFF), UInt8(centi >> 8)])
    }

    static func text(_ events: [DeviceEvent]) -> [String] {
        events.map {
            "\($0.availability ? "availability" : "reading") \($0.device) \(String(decoding: $0.payload, as: UTF8.self))"
        }
    }

    @Test(
        "each device topic's latest message as published, in the order the topics first came; the watcher told once per interval; nothing kept unwatched"
    )
    func latestInOrder() async throws {
        let harness = try Harness(Self.config)
        try await harness.start()
        let a = address("A4:C1:38:00:00:01")
        let b = address("A4:C1:38:00:00:02")
        // Not watched: nothing is kept.
        await harness.gateway.handle(Self.reading(a, 2000))
        await harness.settle()
        #expect(await harness.gateway.takeDeviceEvents().isEmpty)
        let firsts = Firsts()
        await harness.gateway.observeDeviceEvents { firsts.count.withLock { $0 += 1 } }
        await harness.advance(2)
        await harness.gateway.handle(Self.reading(b, 2100))
        await harness.settle()
        await harness.advance(2)
        await harness.gateway.handle(Self.reading(a, 2200))
        await harness.settle()
        await harness.advance(2)
        await harness.gateway.handle(Self.reading(b, 2300))
        await harness.settle()
        #expect(firsts.value == 1)
        let events = await harness.gateway.takeDeviceEvents()
        let lastA = harness.mqtt.payloads(on: "gattway/A4C138000001").last ?? ""
        let lastB = harness.mqtt.payloads(on: "gattway/A4C138000002").last ?? ""
        #expect(lastB.contains("23"), "\(lastB)")
        #expect(
            Self.text(events) == [
                #"availability A4C138000002 {"state":"online"}"#, "reading A4C138000002 \(lastB)",
                "reading A4C138000001 \(lastA)",
            ])
        // The next interval starts empty and tells the watcher again.
        #expect(await harness.gateway.takeDeviceEvents().isEmpty)
        await harness.advance(2)
        await harness.gateway.handle(Self.reading(a, 2400))
        await harness.settle()
        #expect(firsts.value == 2)
        let next = await harness.gateway.takeDeviceEvents()
        #expect(
            Self.text(next) == ["reading A4C138000001 \(harness.mqtt.payloads(on: "gattway/A4C138000001").last ?? "")"])
        // Unwatched: forgotten, and nothing more kept.
        await harness.advance(2)
        await harness.gateway.handle(Self.reading(a, 2500))
        await harness.settle()
        await harness.gateway.observeDeviceEvents(nil)
        #expect(await harness.gateway.takeDeviceEvents().isEmpty)
        await harness.advance(2)
        await harness.gateway.handle(Self.reading(a, 2600))
        await harness.settle()
        #expect(await harness.gateway.takeDeviceEvents().isEmpty)
        #expect(firsts.value == 3)
        await harness.stop()
    }

    @Test(
        "a device removed within the interval: its events keep their place and name, with the cleared messages; the next device in its slot has its own"
    )
    func removedDevice() async throws {
        let harness = try Harness(Self.config)
        try await harness.start()
        let firsts = Firsts()
        await harness.gateway.observeDeviceEvents { firsts.count.withLock { $0 += 1 } }
        await harness.gateway.handle(Self.reading(address("A4:C1:38:00:00:01"), 2000))
        await harness.settle()
        let removed = await harness.gateway.pageRequest(
            verb: "device/remove", payload: Array(#"{"device": "A4C138000001"}"#.utf8))
        #expect(removed?["status"] == .string("ok"))
        await harness.gateway.handle(Self.reading(address("A4:C1:38:00:00:03"), 2100))
        await harness.settle()
        let last = harness.mqtt.payloads(on: "gattway/A4C138000003").last ?? ""
        #expect(
            Self.text(await harness.gateway.takeDeviceEvents()) == [
                "availability A4C138000001 ", "reading A4C138000001 ",
                #"availability A4C138000003 {"state":"online"}"#, "reading A4C138000003 \(last)",
            ])
        #expect(firsts.value == 1)
        await harness.stop()
    }
}
