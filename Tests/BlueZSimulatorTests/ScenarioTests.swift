import Bluetooth
import Foundation
import JSON
import Testing

@testable import BlueZSimulator

@Suite("Scenario files")
struct ScenarioTests {
    @Test("a full device entry is read with its GATT tree, payloads and faults")
    func readsDevice() throws {
        let json = """
            {
              "seed": 7,
              "adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}],
              "devices": [{
                "address": "A4:C1:38:00:00:01", "name": "Battery", "rssi": -55, "rssi_jitter": 3,
                "interval": "500ms", "service_uuids": ["180F"],
                "manufacturer_data": {"0x0499": {"template": "ruuvi_rawv2", "fields": {"temperature": {"random": {"min": 20, "max": 25}}}}},
                "service_data": {"fcd2": {"hex": "40 02 c4 09"}},
                "gatt": [{"uuid": "180F", "characteristics": [
                  {"uuid": "2A19", "flags": ["read", "notify"],
                   "value": {"number": {"counter": {"start": 100, "step": -1, "min": 0, "max": 100}}, "format": "u8"},
                   "notify": {"every": "1s"}}
                ]}],
                "faults": {"connect_failures": 2, "link_drop_after": "10s"}
              }],
              "events": [{"at": "5s", "adapter": "hci0", "powered": false}, {"at": "2s", "crash": true}]
            }
            """
        let scenario = try Scenario.parse(Data(json.utf8))
        #expect(scenario.seed == 7)
        let device = try #require(scenario.devices.first)
        #expect(device.address == BluetoothAddress("A4:C1:38:00:00:01"))
        #expect(device.interval == 0.5)
        #expect(device.serviceUUIDs == [BluetoothUUID(0x180F)])
        #expect(device.manufacturerData.first?.companyID == 0x0499)
        #expect(device.serviceData.first?.payload == .bytes([0x40, 0x02, 0xC4, 0x09]))
        let characteristic = try #require(device.services.first?.characteristics.first)
        #expect(characteristic.flags == ["read", "notify"])
        #expect(characteristic.notifyInterval == 1)
        #expect(device.faults.connectFailures == 2)
        #expect(device.faults.linkDropAfter == 10)
        #expect(scenario.events.map(\.at) == [2, 5], "events are sorted by time")
    }

    @Test(
        "errors name the JSON path and what was expected",
        arguments: [
            (#"{"devices": [{"address": "AA:BB"}]}"#, "devices[0].address: \"AA:BB\" is not a Bluetooth address"),
            (
                #"{"devices": [{"address": "A4:C1:38:00:00:01", "rssi": "loud"}]}"#,
                "devices[0].rssi: expected an integer from -127 to 20"
            ),
            (#"{"devices": [{"address": "A4:C1:38:00:00:01", "colour": 1}]}"#, "devices[0].colour: is not a known key"),
            (
                #"{"devices": [{"address": "A4:C1:38:00:00:01", "gatt": [{"uuid": "180F", "characteristics": [{"uuid": "2A19", "flags": ["reed"]}]}]}]}"#,
                "devices[0].gatt[0].characteristics[0].flags[0]: \"reed\" is not a characteristic flag"
            ),
            (
                #"{"devices": [{"address": "A4:C1:38:00:00:01", "service_data": {"fcd2": {"template": "bthome_v9"}}}]}"#,
                "devices[0].service_data.fcd2.template: \"bthome_v9\" is not a template"
            ),
            (
                #"{"devices": [{"address": "A4:C1:38:00:00:01", "adapter": "hci7"}]}"#,
                "devices[0].adapter: no adapter named \"hci7\""
            ),
            (
                #"{"devices": [{"address": "A4:C1:38:00:00:01"}, {"address": "a4:c1:38:00:00:01"}]}"#,
                "devices[1].address: A4:C1:38:00:00:01 is used twice"
            ),
            (#"{"devices": [}"#, "invalid JSON at byte 13"),
            (#"{"seed": 9223372036854775808}"#, "seed: expected an integer from 0 to 9223372036854775807"),
            (#"{"seed": 1e300}"#, "seed: expected an integer from 0 to 9223372036854775807"),
        ])
    func errorsNamePaths(json: String, message: String) {
        #expect {
            _ = try Scenario.parse(Data(json.utf8))
        } throws: { error in
            "\(error)".contains(message)
        }
    }

    /// Found by the scenario fuzz target (Tests/Fixtures/fuzz/scenario/notify-every-2.6e79s): a
    /// duration the simulator's UInt64-nanosecond timers cannot hold parsed, and arming its timer
    /// (`UInt64(seconds * 1e9)`) would trap. Every scenario duration is now at most 365 days.
    @Test(
        "a duration past 365 days is an error naming its path, wherever durations are",
        arguments: [
            #"{"devices": [{"address": "A4:C1:38:00:00:01", "interval": "1e300s"}]}"#,
            #"{"devices": [{"address": "A4:C1:38:00:00:01", "gatt": [{"uuid": "180F", "characteristics": [{"uuid": "2A19", "flags": ["notify"], "notify": {"every": "25555555555555555555555555555555555555555555555555555555555555555555555555555555s"}}]}]}]}"#,
            #"{"devices": [{"address": "A4:C1:38:00:00:01", "faults": {"connect_delay": 31536001}}]}"#,
            #"{"events": [{"at": "525601m", "crash": true}]}"#,
            #"{"timing": {"temporary_timeout": "8761h"}}"#,
            #"{"adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}, {"name": "hci1", "address": "00:AA:01:00:00:01"}], "links": [{"adapters": ["hci0", "hci1"], "interval": "1e12s"}]}"#,
        ])
    func durationsAreBounded(json: String) {
        #expect {
            _ = try Scenario.parse(Data(json.utf8))
        } throws: { error in
            "\(error)".contains("(at most 365 days)")
        }
    }

    @Test("365 days exactly is still a duration")
    func longestDuration() throws {
        let scenario = try Scenario.parse(Data(#"{"events": [{"at": "8760h", "crash": true}]}"#.utf8))
        #expect(scenario.events.first?.at == DurationText.maximumSeconds)
    }

    @Test("a scenario file is read from its path; a missing one is named with the reason")
    func loadsFromPath() throws {
        let path = NSTemporaryDirectory() + "scenario-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).json"
        try DemoScenario.json.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let loaded = try Scenario.load(path: path)
        #expect(loaded.devices == (try Scenario.parse(Data(DemoScenario.json.utf8))).devices)
        #expect(!loaded.devices.isEmpty)
        let missing = #expect(throws: ScenarioError.self) { try Scenario.load(path: path + ".missing") }
        #expect(missing?.description == "cannot read \(path).missing: No such file or directory")
    }

    @Test("number generators: counters wrap, sequences repeat, random stays in range and repeats with the seed")
    func generators() {
        var counter = NumberSource(.counter(start: 2, step: -1, min: 0, max: 2), seed: 1)
        #expect((0..<5).map { _ in counter.next() } == [2, 1, 0, 2, 1])
        var sequence = NumberSource(.sequence([1, 5]), seed: 1)
        #expect((0..<3).map { _ in sequence.next() } == [1, 5, 1])
        var a = NumberSource(.random(min: 20, max: 25, resolution: 0.1), seed: 42)
        var b = NumberSource(.random(min: 20, max: 25, resolution: 0.1), seed: 42)
        let values = (0..<100).map { _ in a.next() }
        #expect(values.allSatisfy { (20...25).contains($0) })
        #expect(values == (0..<100).map { _ in b.next() })
        #expect(Set(values).count > 10)
    }

    @Test(
        "number formats encode like the SIG characteristics",
        arguments: [
            (21.5, NumberFormat(.s16le, scale: 0.01), [0x66, 0x08] as [UInt8]),
            (-4.5, NumberFormat(.s16be, scale: 0.1), [0xFF, 0xD3]),
            (85, NumberFormat(.u8), [0x55]),
            (300, NumberFormat(.u8), [0xFF]),
            (101325, NumberFormat(.u32le, scale: 0.1), [0x02, 0x76, 0x0F, 0x00]),
        ] as [(Double, NumberFormat, [UInt8])])
    func formats(value: Double, format: NumberFormat, bytes: [UInt8]) {
        #expect(format.encode(value) == bytes)
    }

    @Test(
        "number formats and templates turn NaN and infinite values (a zero scale, runaway generators) into bytes instead of trapping"
    )
    func nonFiniteValues() throws {
        #expect(NumberFormat(.u8, scale: 0).encode(0) == [0x00], "0 / 0 is NaN")
        #expect(NumberFormat(.s16le, scale: 0).encode(-1) == [0x00, 0x80], "-1 / 0 clamps to the minimum")
        #expect(NumberFormat(.u32le).encode(.infinity) == [0xFF, 0xFF, 0xFF, 0xFF])
        let address = try #require(BluetoothAddress("A4:C1:38:D5:D4:98"))
        for template in AdvertisementTemplate.allCases {
            let values = Dictionary(uniqueKeysWithValues: template.defaults.map { ($0.name, Double.nan) })
            #expect(template.encode(values, address: address).count == template.encode([:], address: address).count)
        }
    }

    @Test("templates produce the documented byte layouts")
    func templates() throws {
        let atcAddress = try #require(BluetoothAddress("A4:C1:38:D5:D4:98"))
        let atc = AdvertisementTemplate.atc1441.encode(
            ["temperature": 32.5, "humidity": 62, "battery": 81, "voltage": 2.939, "counter": 0x62], address: atcAddress
        )
        #expect(Hex.encode(atc) == "a4c138d5d49801453e510b7b62")
        let pvvxAddress = try #require(BluetoothAddress("A4:C1:38:CF:01:56"))
        let pvvx = AdvertisementTemplate.pvvx.encode(
            ["temperature": 21.12, "humidity": 50.53, "voltage": 3.143, "battery": 100, "counter": 0xCC],
            address: pvvxAddress)
        #expect(Hex.encode(pvvx) == "5601cf38c1a44008bd13470c64cc04")
        let ruuviAddress = try #require(BluetoothAddress("CB:B8:33:4C:88:4F"))
        let ruuvi = AdvertisementTemplate.ruuviRAWv2.encode(
            [
                "temperature": 24.3, "humidity": 53.49, "pressure": 1000.44, "acceleration_x": 0.004,
                "acceleration_y": -0.004, "acceleration_z": 1.036, "voltage": 2.977, "tx_power": 4,
                "movement_counter": 66, "sequence": 205,
            ], address: ruuviAddress)
        #expect(Hex.encode(ruuvi) == "0512fc5394c37c0004fffc040cac364200cdcbb8334c884f")
        let bthome = AdvertisementTemplate.bthomeV2.encode(
            ["packet_id": 9, "battery": 100, "temperature": 25, "humidity": 50.55], address: atcAddress)
        #expect(Hex.encode(bthome) == "4000090164" + "02c409" + "03bf13")
    }
}

@Suite("The demo scenario")
struct DemoScenarioTests {
    @Test(
        "has the battery sensor, environmental sensor, lamp, BTHome and Ruuvi advertisers and a heart-rate-only device")
    func demoContents() throws {
        let scenario = try Scenario.parse(Data(DemoScenario.json.utf8))
        let battery = BluetoothUUID(0x180F)
        let byName = Dictionary(uniqueKeysWithValues: scenario.devices.map { ($0.name ?? "", $0) })
        let sensor = try #require(byName["Battery Sensor"])
        #expect(sensor.serviceUUIDs.contains(battery))
        let level = try #require(sensor.services.first?.characteristics.first)
        #expect(level.uuid == BluetoothUUID(0x2A19) && level.flags.contains("notify"))
        let env = try #require(byName["Env Sensor"])
        let envChars = env.services.flatMap(\.characteristics).filter { $0.flags.contains("notify") }.map(\.uuid)
        #expect(envChars == [BluetoothUUID(0x2A6E), BluetoothUUID(0x2A6F)])
        let lamp = try #require(byName["Desk Lamp"])
        #expect(lamp.services.flatMap(\.characteristics).contains { $0.reflectWritesTo != nil })
        #expect(byName["BTHome TH"]?.serviceData.first?.uuid == BluetoothUUID(0xFCD2))
        #expect(byName["Ruuvi 4A5F"]?.manufacturerData.first?.companyID == 0x0499)
        let strap = try #require(byName["HR Strap"])
        #expect(strap.serviceUUIDs == [BluetoothUUID(0x180D)])
        let merged = MergedDiscoveryFilter([
            {
                var f = DiscoveryFilter(); f.uuids = [battery]; return f
            }()
        ])
        let reported = scenario.devices.filter {
            merged.admits(
                address: $0.address, name: $0.name, serviceUUIDs: $0.serviceUUIDs, rssi: Int16($0.rssi),
                discoverable: $0.discoverable)
        }.compactMap(\.name)
        #expect(reported.sorted() == ["Battery Sensor", "Desk Lamp", "Env Sensor"])
    }
}
