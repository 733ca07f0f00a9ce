import Bluetooth
import GatewayFakes
import Testing

@testable import Gateway

/// What the radio's view keeps of each report when only the page reads it
/// (``RadioView/contentInterval``): every report's numbers, its content at most a second old.
@Suite("The radio's view: each report's numbers, its content at most contentInterval old")
struct RadioViewContentTests {
    static func noteTracked(_ view: RadioView, _ discovery: BLEDiscovery, now: Double, device: String = "sensor") {
        view.note(
            discovery, outcome: .decoded, decode: .decoded, parser: "bthome_v2", device: device, now: now,
            wall: Int64(now * 1000), trial: { _ in (.unknownFormat, nil) })
    }

    static func report(_ data: [UInt8], rssi: Int16, adapter: UInt8 = 0) -> BLEDiscovery {
        BLEDiscovery(
            address: RadioViewTests.sensor, advertisement: AdvertisementData(rssi: rssi), adapter: adapter, data: data,
            addressType: .public)
    }

    @Test(
        "within contentInterval a report adds its RSSI, adapter, time and count, not its AD bytes; after it, its content; 0 takes every report's"
    )
    func coarseContent() {
        let view = RadioView(maxAddresses: 10, window: 300)
        view.contentInterval = 1
        Self.noteTracked(view, Self.report([2, 1, 6], rssi: -60), now: 10)
        Self.noteTracked(view, Self.report([2, 1, 5], rssi: -61, adapter: 1), now: 10.5, device: "renamed")
        var entry = view.entry(RadioViewTests.sensor)
        #expect(entry?.reports == 2)
        #expect(entry?.lastRSSI == -61)
        #expect(entry?.rssi == [-60, -61])
        #expect(entry?.adapter == 1)
        #expect(entry?.lastSeen == 10.5)
        #expect(entry?.lastSeenWall == 10_500)
        #expect(entry?.data == [2, 1, 6], "the content of the report at 10")
        #expect(entry?.device == "sensor")
        #expect(view.snapshot(now: 10.5, since: 1).entries.count == 1, "a changed entry for the page")
        Self.noteTracked(view, Self.report([2, 1, 4], rssi: -62), now: 11)
        entry = view.entry(RadioViewTests.sensor)
        #expect(entry?.data == [2, 1, 4])
        #expect(entry?.lastRSSI == -62)
        #expect(entry?.reports == 3)
        // A clock that went back takes the content again.
        Self.noteTracked(view, Self.report([2, 1, 3], rssi: -63), now: 5)
        #expect(view.entry(RadioViewTests.sensor)?.data == [2, 1, 3])

        let every = RadioView(maxAddresses: 10, window: 300)
        Self.noteTracked(every, Self.report([2, 1, 6], rssi: -60), now: 10)
        Self.noteTracked(every, Self.report([2, 1, 5], rssi: -61), now: 10.1)
        #expect(every.entry(RadioViewTests.sensor)?.data == [2, 1, 5])
        // An observer hears every report's content.
        view.contentInterval = 1
        let token = view.observe { _ in }
        Self.noteTracked(view, Self.report([2, 1, 2], rssi: -60), now: 5.1)
        #expect(view.entry(RadioViewTests.sensor)?.data == [2, 1, 2])
        view.stopObserving(token)
    }

    @Test("the address index: every address found after the table grew and after evictions rebuilt it")
    func addressIndex() {
        let view = RadioView(maxAddresses: 300, window: 1)
        for index in 0..<1000 {
            RadioViewTests.note(view, RadioViewTests.report(index), now: Double(index) / 100)
            let address = RadioViewTests.report(index).address
            #expect(view.entry(address)?.address == address)
        }
        #expect(view.count <= 300)
        for index in 0..<1000 {
            let address = RadioViewTests.report(index).address
            if let entry = view.entry(address) { #expect(entry.address == address) }
        }
        #expect(view.entry(RadioViewTests.report(999).address) != nil)
        #expect(view.entry(RadioViewTests.report(0).address) == nil)
        #expect(view.entry(BluetoothAddress(rawValue: 0)) == nil)
        RadioViewTests.note(
            view, BLEDiscovery(address: BluetoothAddress(rawValue: 0), advertisement: AdvertisementData()), now: 10)
        #expect(view.entry(BluetoothAddress(rawValue: 0)) != nil)
    }

    @Test(
        "the page's view (raw radio off): a tracked device's reports within a second are counted, their RSSI shown, their content taken once"
    )
    func pageView() async throws {
        let harness = try Harness(
            #"{"bluetooth": {"scan": {"services": []}}, "devices": [{"match": {}}]}"#, radioView: true)
        try await harness.start()
        #expect(await harness.gateway.pageRadio() != nil)
        await harness.settle()
        harness.ble.advertise(RadioViewTests.packet(1, rssi: -50))
        harness.ble.advertise(RadioViewTests.packet(2, rssi: -51))
        await harness.settle()
        var entry = await RadioViewTests.viewed(harness, RadioViewTests.sensor)
        #expect(entry?.reports == 2)
        #expect(entry?.lastRSSI == -51)
        #expect(entry?.outcome == .decoded)
        #expect(entry?.device == "A4C138000001")
        #expect(entry?.advertisement.serviceData.first?.value[2] == 1, "the first report's content")
        await harness.advance(1)
        harness.ble.advertise(RadioViewTests.packet(3, rssi: -52))
        await harness.settle()
        entry = await RadioViewTests.viewed(harness, RadioViewTests.sensor)
        #expect(entry?.reports == 3)
        #expect(entry?.advertisement.serviceData.first?.value[2] == 3)
        await harness.stop()
    }
}
