import Bluetooth
import GatewayFakes
import JSON
import Testing

@testable import Gateway

/// The radio's view (every address heard, bounded, with what became of its last report) and the
/// raw radio on MQTT (`mqtt.raw_advertisements`: `<base>/bridge/radio/<address>`).
@Suite("The radio's view and the raw radio on MQTT")
struct RadioViewTests {
    static let sensor = address("A4:C1:38:00:00:01")
    static let stranger = address("A4:C1:38:00:00:02")
    static let encrypted = address("54:48:E6:8F:80:A5")
    static let frame: [UInt8] = [
        0x41, 0xa4, 0x72, 0x66, 0xc9, 0x5f, 0x73, 0x00, 0x11, 0x22, 0x33, 0x78, 0x23, 0x72, 0x14,
    ]

    static func topic(_ address: BluetoothAddress) -> String { "gattway/bridge/radio/\(address)" }

    func started(_ config: String) async throws -> Harness {
        let harness = try Harness(config)
        try await harness.start()
        return harness
    }

    func radio(_ harness: Harness, _ address: BluetoothAddress) -> [JSONValue] {
        harness.mqtt.payloads(on: Self.topic(address)).compactMap(json)
    }

    /// A BTHome v2 frame with packet id `packet`.
    static func packet(_ packet: UInt8, _ address: BluetoothAddress = sensor, rssi: Int16 = -60) -> BLEDiscovery {
        bthome(address, rssi: rssi, payload: [0x40, 0x00, packet, 0x02, 0xCA, 0x09])
    }

    // MARK: The model

    static func report(_ index: Int, data: [UInt8] = [2, 1, 6], name: String? = nil) -> BLEDiscovery {
        BLEDiscovery(
            address: BluetoothAddress(rawValue: UInt64(0xC0_00_00_00_00_00) + UInt64(index)),
            advertisement: AdvertisementData(localName: name, rssi: -70), data: data, addressType: .random)
    }

    static func note(_ view: RadioView, _ discovery: BLEDiscovery, now: Double, outcome: RadioOutcome = .noRule) {
        view.note(
            discovery, outcome: outcome, decode: nil, parser: nil, device: nil, now: now, wall: 0,
            trial: { _ in (.unknownFormat, nil) })
    }

    @Test("thousands of rotating addresses: the view stays within max_addresses, evicts the longest silent, counts it")
    func boundedUnderRotation() {
        let view = RadioView(maxAddresses: 100, window: 300)
        let kept = Self.report(0)
        for index in 1...5000 {
            Self.note(view, Self.report(index), now: Double(index) / 1000)
            // One address keeps talking: it is never the longest silent.
            if index % 10 == 0 { Self.note(view, kept, now: Double(index) / 1000) }
            #expect(view.count <= 100)
        }
        #expect(view.entry(kept.address) != nil)
        #expect(view.entry(Self.report(5000).address) != nil)
        #expect(view.entry(Self.report(1).address) == nil)
        let snapshot = view.snapshot(now: 5)
        #expect(snapshot.evicted >= 4900)
        #expect(snapshot.entries.count == view.count)
        #expect(snapshot.entries.first?.lastSeen == 5, "most recent first")
        #expect(snapshot.entries.last.map { $0.lastSeen < 5 } == true)
    }

    @Test("an address not heard within the window leaves the snapshot; a full view sweeps it out first")
    func window() {
        let view = RadioView(maxAddresses: 3, window: 60)
        for index in 0..<3 { Self.note(view, Self.report(index), now: 0) }
        Self.note(view, Self.report(0), now: 50)
        #expect(view.snapshot(now: 70).entries.map(\.address) == [Self.report(0).address])
        Self.note(view, Self.report(9), now: 70)
        #expect(view.count == 2, "the two silent ones swept, not a quarter of the live ones")
        #expect(view.snapshot(now: 70).evicted == 2)
    }

    @Test("AD bytes and names from the radio are bounded; RSSI per adapter; the rate; changes since a snapshot")
    func bounds() {
        let view = RadioView(maxAddresses: 10, window: 300)
        let long = Self.report(1, data: [UInt8](repeating: 0xAB, count: 2000), name: String(repeating: "n", count: 500))
        Self.note(view, long, now: 0)
        var other = long
        other.adapter = 2
        other.advertisement.rssi = -90
        Self.note(view, other, now: 1)
        let entry = view.entry(long.address)
        #expect(entry?.data.count == RadioView.maxDataLength)
        #expect(entry?.name?.count == RadioView.maxNameLength)
        #expect(entry?.rssi == [-70, nil, -90])
        #expect(entry?.addressType == .random)
        #expect(entry?.isRebuilt == false)
        var lots = other
        lots.adapter = 200
        Self.note(view, lots, now: 2)
        #expect(view.entry(long.address)?.rssi.count == 3, "an adapter index beyond 8 keeps no slot")
        for second in 3...12 { Self.note(view, Self.report(1), now: Double(second)) }
        #expect((view.entry(long.address)?.reportsPerSecond ?? 0) > 0.9)
        let mark = view.snapshot(now: 12).sequence
        #expect(view.snapshot(now: 12, since: mark).entries.isEmpty)
        Self.note(view, Self.report(2), now: 13)
        #expect(view.snapshot(now: 13, since: mark).entries.map(\.address) == [Self.report(2).address])
    }

    @Test("observers hear every noted report until they stop")
    func observers() {
        let view = RadioView(maxAddresses: 10, window: 300)
        var heard: [BluetoothAddress] = []
        let token = view.observe { heard.append($0.address) }
        Self.note(view, Self.report(1), now: 0)
        Self.note(view, Self.report(2), now: 0)
        view.stopObserving(token)
        Self.note(view, Self.report(3), now: 0)
        #expect(heard == [Self.report(1).address, Self.report(2).address])
    }

    @Test("D-Bus reports (no bytes from the controller) are rebuilt from the properties and marked so")
    func rebuilt() {
        let view = RadioView(maxAddresses: 10, window: 300)
        let discovery = BLEDiscovery(
            address: Self.sensor,
            advertisement: AdvertisementData(
                localName: "T", serviceData: [BluetoothUUID(0xFCD2): [0x40, 0x02, 0xCA, 0x09]], rssi: -60))
        Self.note(view, discovery, now: 0)
        let entry = view.entry(Self.sensor)
        #expect(entry?.isRebuilt == true)
        #expect(entry?.data == [0x07, 0x16, 0xD2, 0xFC, 0x40, 0x02, 0xCA, 0x09, 0x02, 0x09, 0x54])
        #expect(entry?.json(adapters: ["hci0"])["source"] == .string("dbus"))
    }

    // MARK: Outcomes through the gateway

    static let allConfig = #"{"mqtt": {"raw_advertisements": {"mode": "all", "interval": "0s"}}, "#

    @Test(
        "decoded: the parser and the device it published to; a repeat is a repeated frame; on MQTT, QoS 0, not retained"
    )
    func decoded() async throws {
        let harness = try await started(
            Self.allConfig + #""devices": [{"match": {"address": "A4:C1:38:00:00:01"}, "name": "th"}]}"#)
        await harness.gateway.handle(Self.packet(1))
        await harness.gateway.handle(Self.packet(1))
        await harness.settle()
        let messages = harness.mqtt.messages(on: Self.topic(Self.sensor))
        #expect(messages.count == 2)
        #expect(messages.allSatisfy { $0.qos == 0 && !$0.retain })
        let first = try #require(json(messages[0].payloadText))
        #expect(first["outcome"] == .string("decoded"))
        #expect(first["parser"] == .string("bthome_v2"))
        #expect(first["device"] == .string("th"))
        #expect(first["adapter"] == .string("hci0"))
        #expect(first["rssi"] == .number(-60))
        #expect(first["source"] == .string("dbus"))
        #expect(first["data"] == .string("0916d2fc40000102ca09"))
        #expect(json(messages[1].payloadText)?["outcome"] == .string("repeated_frame"))
        #expect(harness.mqtt.payloads(on: "gattway/th").count == 1)
    }

    @Test("unknown format, no payload, key missing, key wrong: each named, each counted as before")
    func parserOutcomes() async throws {
        let harness = try await started(
            Self.allConfig
                + #""devices": [{"match": {"address": "54:48:E6:8F:80:A5"}, "bindkey": "00112233445566778899aabbccddeeff"}, {"match": {}}]}"#
        )
        await harness.gateway.handle(
            BLEDiscovery(
                address: Self.sensor,
                advertisement: AdvertisementData(manufacturerData: [0xFFFE: [1, 2, 3]], rssi: -50)))
        await harness.gateway.handle(
            BLEDiscovery(address: Self.stranger, advertisement: AdvertisementData(localName: "x", rssi: -50)))
        await harness.gateway.handle(bthome(Self.encrypted, payload: Self.frame))
        let keyless = address("54:48:E6:8F:80:A6")
        await harness.gateway.handle(bthome(keyless, payload: Self.frame))
        await harness.settle()
        #expect(radio(harness, Self.sensor).last?["outcome"] == .string("unknown_format"))
        #expect(radio(harness, Self.stranger).last?["outcome"] == .string("no_payload"))
        #expect(radio(harness, Self.stranger).last?["name"] == .string("x"))
        #expect(radio(harness, Self.encrypted).last?["outcome"] == .string("key_wrong"))
        #expect(radio(harness, keyless).last?["outcome"] == .string("key_missing"))
        #expect(await harness.gateway.counters.dropped.keyMissing == 1)
        #expect(await harness.gateway.counters.dropped.keyWrong == 1)
        #expect(await harness.gateway.suggestedRule(for: keyless) == nil, "tracked: a rule publishes it already")
    }

    @Test(
        "below rssi_threshold and outside scan.services: noted with what a parser would make of them, and a rule that would publish them"
    )
    func filtered() async throws {
        let harness = try await started(
            Self.allConfig
                + #""bluetooth": {"scan": {"services": ["FCD2"], "rssi_threshold": -80}}, "devices": [{"match": {}}]}"#)
        // The core asks the port for every device: it filters itself, and so sees what it filters.
        #expect(harness.ble.scanFilters == [[]])
        await harness.gateway.handle(Self.packet(1, rssi: -95))
        let battery = BLEDiscovery(
            address: Self.stranger,
            advertisement: AdvertisementData(serviceUUIDs: [BluetoothUUID(0x180F)], rssi: -40))
        await harness.gateway.handle(battery)
        await harness.settle()
        let weak = try #require(radio(harness, Self.sensor).last)
        #expect(weak["outcome"] == .string("below_rssi_threshold"))
        #expect(weak["decode"] == .string("decoded"))
        #expect(weak["parser"] == .string("bthome_v2"))
        #expect(radio(harness, Self.stranger).last?["outcome"] == .string("filtered_by_scan_services"))
        #expect(radio(harness, Self.stranger).last?["decode"] == .string("no_payload"))
        #expect(await harness.gateway.counters.dropped.filtered == 2)
        let weakRule = try #require(await harness.gateway.suggestedRule(for: Self.sensor))
        #expect(weakRule.notes.contains { $0.contains("rssi_threshold (-80 dBm)") && $0.contains("-95 dBm") })
        let serviceRule = try #require(await harness.gateway.suggestedRule(for: Self.stranger))
        #expect(serviceRule.notes.contains { $0.contains("180F") && $0.contains("bluetooth.scan.services") })
    }

    @Test("no rule: a decodable advertisement gets a rule that is valid config and, applied, publishes the device")
    func suggestedRulePublishes() async throws {
        let harness = try await started(
            Self.allConfig + #""devices": [{"match": {"address": "11:22:33:44:55:66"}}]}"#)
        await harness.gateway.handle(Self.packet(3))
        await harness.gateway.handle(
            BLEDiscovery(
                address: Self.stranger, advertisement: AdvertisementData(manufacturerData: [0xFFFE: [1]], rssi: -50)))
        await harness.settle()
        let noted = try #require(radio(harness, Self.sensor).last)
        #expect(noted["outcome"] == .string("no_rule"))
        #expect(noted["decode"] == .string("decoded"))
        #expect(
            await harness.gateway.suggestedRule(for: Self.stranger) == nil,
            "no parser knows it: a rule publishes nothing")
        let suggestion = try #require(await harness.gateway.suggestedRule(for: Self.sensor))
        var rule: [UInt8] = []
        suggestion.rule.write(into: &rule)
        let text = String(decoding: rule, as: UTF8.self)
        #expect(text == #"{"match":{"address":"A4:C1:38:00:00:01"}}"#)
        // Parsed by the real config parser, then used.
        let applied = try await started(#"{"devices": [\#(text)]}"#)
        await applied.gateway.handle(Self.packet(4))
        await applied.settle()
        #expect(applied.mqtt.payloads(on: "gattway/A4C138000001").count == 1)
    }

    @Test("registry full: the rule matches but there is no room")
    func registryFull() async throws {
        let harness = try await started(
            Self.allConfig
                + #""bluetooth": {"max_devices": 1}, "devices": [{"match": {"address": "A4:C1:38:00:00:09"}}, {"match": {}}]}"#
        )
        await harness.gateway.handle(Self.packet(1, address("A4:C1:38:00:00:09")))
        await harness.gateway.handle(Self.packet(1))
        await harness.settle()
        #expect(radio(harness, Self.sensor).last?["outcome"] == .string("registry_full"))
        let suggestion = try #require(await harness.gateway.suggestedRule(for: Self.sensor))
        #expect(suggestion.notes.contains { $0.contains("max_devices (1)") })
    }

    // MARK: Rate limit and modes

    @Test("all mode: one message per address per interval; the rest counted as dropped.radio_rate_limited")
    func rateLimit() async throws {
        let harness = try await started(
            #"{"mqtt": {"raw_advertisements": {"mode": "all", "interval": "1s"}}, "health": {"interval": "60s"}, "devices": [{"match": {}}]}"#
        )
        for packet: UInt8 in 1...5 { await harness.gateway.handle(Self.packet(packet)) }
        await harness.gateway.handle(Self.packet(1, Self.stranger))
        await harness.settle()
        #expect(radio(harness, Self.sensor).count == 1)
        #expect(radio(harness, Self.stranger).count == 1, "per address")
        #expect(await harness.gateway.counters.dropped.radioRateLimited == 4)
        await harness.advance(1)
        await harness.gateway.handle(Self.packet(6))
        await harness.settle()
        #expect(radio(harness, Self.sensor).count == 2)
        await harness.advance(59)
        let health = try #require(harness.mqtt.payloads(on: "gattway/bridge/health").last.flatMap(json))
        #expect(health["dropped"]?["radio_rate_limited"] == .number(4))
        #expect(health["raw_radio"]?["addresses"] == .number(2))
        #expect(health["raw_radio"]?["published"] == .number(3))
    }

    @Test("changed mode (the default): the same report again is not published; a change after the interval is")
    func changedMode() async throws {
        let harness = try await started(#"{"mqtt": {"raw_advertisements": true}, "devices": [{"match": {}}]}"#)
        let still = BLEDiscovery(
            address: Self.stranger, advertisement: AdvertisementData(manufacturerData: [0xFFFE: [1]], rssi: -50))
        for _ in 0..<5 { await harness.gateway.handle(still) }
        await harness.settle()
        #expect(radio(harness, Self.stranger).count == 1)
        #expect(await harness.gateway.counters.dropped.radioRateLimited == 0, "unchanged is not a drop")
        var moved = still
        moved.advertisement.manufacturerData = [0xFFFE: [2]]
        await harness.gateway.handle(moved)
        await harness.settle()
        #expect(radio(harness, Self.stranger).count == 1, "within the interval")
        #expect(await harness.gateway.counters.dropped.radioRateLimited == 1)
        await harness.advance(1)
        await harness.gateway.handle(moved)
        await harness.settle()
        #expect(radio(harness, Self.stranger).last?["data"] == .string("04fffeff02"))
    }

    @Test("off by default: no view, no bridge/radio topic, the scan filtered by scan.services as before")
    func offByDefault() async throws {
        let harness = try await started(#"{"bluetooth": {"scan": {"services": ["FCD2"]}}, "devices": [{"match": {}}]}"#)
        #expect(harness.ble.scanFilters == [[BluetoothUUID(0xFCD2)]])
        await harness.gateway.handle(Self.packet(1))
        await harness.settle()
        #expect(await harness.gateway.radioSnapshot() == nil)
        #expect(!harness.mqtt.published.contains { $0.topic.contains("/radio/") })
    }

    /// The view's entry of `address`, without asking for the view.
    static func viewed(_ harness: Harness, _ address: BluetoothAddress) async -> RadioEntry? {
        await harness.gateway.radioSnapshot()?.entries.first { $0.address == address }
    }

    @Test(
        "the page's view (web on, raw radio off) listens only while asked: the scan keeps scan.services until then, an unfiltered one is added for the rest and ends a minute after the last ask"
    )
    func viewOnDemand() async throws {
        // Nothing read here asks for the view (only the page's reads do).
        let harness = try Harness(
            #"{"bluetooth": {"scan": {"services": ["FCD2"]}}, "devices": [{"match": {}}]}"#, radioView: true)
        try await harness.start()
        let battery = BLEDiscovery(
            address: Self.stranger, advertisement: AdvertisementData(serviceUUIDs: [BluetoothUUID(0x180F)], rssi: -40))
        // Unasked: the scan is filtered as without the web server, and nothing is noted.
        #expect(harness.ble.activeScanFilters == [[BluetoothUUID(0xFCD2)]])
        harness.ble.advertise(Self.packet(1))
        harness.ble.advertise(battery)
        await harness.settle()
        #expect(await harness.gateway.counters.advertisements == 1, "the filter kept the battery report out")
        #expect(await harness.gateway.radioSnapshot()?.addresses == 0, "nothing noted while nobody looks")

        // The page asks: an unfiltered scan joins, handing the core only what the filter kept out.
        #expect(await harness.gateway.pageRadio() != nil)
        await harness.settle()
        #expect(harness.ble.activeScanFilters == [[BluetoothUUID(0xFCD2)], []])
        harness.ble.advertise(Self.packet(2))
        harness.ble.advertise(battery)
        await harness.settle()
        #expect(await harness.gateway.counters.advertisements == 3, "each report reached the core once")
        #expect(await Self.viewed(harness, Self.sensor)?.outcome == .decoded)
        #expect(await Self.viewed(harness, Self.stranger)?.outcome == .filteredByServices)
        #expect(await Self.viewed(harness, Self.sensor)?.reports == 1)

        // Asked again within the minute: still listening; a minute after the last ask it stops,
        // and the unfiltered scan ends with the next report.
        await harness.advance(50)
        _ = await harness.gateway.pageRadio()
        await harness.advance(50)
        harness.ble.advertise(Self.packet(3))
        await harness.settle()
        #expect(await Self.viewed(harness, Self.sensor)?.reports == 2)
        await harness.advance(11)
        harness.ble.advertise(Self.packet(4))
        await harness.settle()
        #expect(await Self.viewed(harness, Self.sensor)?.reports == 2, "not noted after the minute")
        #expect(harness.ble.activeScanFilters == [[BluetoothUUID(0xFCD2)]])
        harness.ble.advertise(battery)
        await harness.settle()
        #expect(await harness.gateway.counters.advertisements == 5, "the battery report is kept out again")
    }

    @Test("a name with quotes and control characters is escaped; the payload is valid JSON")
    func escaping() async throws {
        let harness = try await started(Self.allConfig + #""devices": []}"#)
        let hostile = "a\"b\\c\u{0}\n\u{1F}</script>"
        await harness.gateway.handle(
            BLEDiscovery(address: Self.stranger, advertisement: AdvertisementData(localName: hostile, rssi: -50)))
        await harness.settle()
        #expect(radio(harness, Self.stranger).last?["name"] == .string(hostile))
    }

    // MARK: Configuration

    @Test("mqtt.raw_advertisements: true, false, an object; bad values are config errors naming the key")
    func configuration() throws {
        let on = try GatewayConfig.parse(Array(#"{"mqtt": {"raw_advertisements": true}}"#.utf8))
        #expect(on.mqtt.rawAdvertisements.enabled)
        #expect(on.mqtt.rawAdvertisements.mode == .changed)
        #expect(on.mqtt.rawAdvertisements.interval == 1)
        #expect(!(try GatewayConfig.parse(Array("{}".utf8))).mqtt.rawAdvertisements.enabled)
        let object = try GatewayConfig.parse(
            Array(
                #"{"mqtt": {"raw_advertisements": {"mode": "all", "interval": "250ms", "max_addresses": 50, "window": "2m"}}}"#
                    .utf8))
        var expected = RawAdvertisementSettings()
        expected.enabled = true
        expected.mode = .all
        expected.interval = 0.25
        expected.maxAddresses = 50
        expected.window = 120
        #expect(object.mqtt.rawAdvertisements == expected)
        for (text, expected) in [
            (#"{"mode": "some"}"#, #"mqtt.raw_advertisements.mode: "some" is not a mode"#),
            (#"{"interval": "2h"}"#, "mqtt.raw_advertisements.interval: expected a duration from 0s to 1h"),
            (
                #"{"max_addresses": 0}"#,
                "mqtt.raw_advertisements.max_addresses: expected an integer from 1 to 100000"
            ),
            (#"{"window": "0s"}"#, "mqtt.raw_advertisements.window: expected a duration from 1s to 24h"),
            (#"{"topic": "x"}"#, "mqtt.raw_advertisements.topic: is not a known key"),
            ("3", "mqtt.raw_advertisements: expected an object"),
        ] {
            #expect(throws: GatewayConfigError.self) {
                try GatewayConfig.parse(Array(#"{"mqtt": {"raw_advertisements": \#(text)}}"#.utf8))
            }
            do {
                _ = try GatewayConfig.parse(Array(#"{"mqtt": {"raw_advertisements": \#(text)}}"#.utf8))
            } catch {
                #expect("\(error)".contains(expected), "\(error)")
            }
        }
    }
}
