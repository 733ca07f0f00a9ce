import Bluetooth
import Parsers
import Testing

@testable import Gateway

@Suite("Compact attributes and the attribute table")
struct AttributeTableTests {
    @Test("an attribute takes 16 bytes; a device record stays small")
    func sizes() {
        #expect(MemoryLayout<StoredValue>.size == 9)
        #expect(MemoryLayout<Attribute>.stride == 16)
        #expect(MemoryLayout<AvailabilityTracker>.size <= 18)
        #expect(MemoryLayout<RateControl>.size <= 17)
        #expect(MemoryLayout<DeviceRecord>.stride <= 152)
    }

    @Test("an interned table hands out one index per distinct value, never its placeholder, and refuses a 65,537th")
    func interned() {
        var table = Interned<Int>(first: -1)
        #expect(table.index(of: 7) == 1)
        #expect(table.index(of: 8) == 2)
        #expect(table.index(of: 7) == 1)
        #expect(table.index(of: -1) == 3)  // the placeholder is not a stored value
        #expect(table.values == [-1, 7, 8, -1])
        var full = Interned<Int>()
        for value in 0..<65_536 { #expect(full.index(of: value) == UInt16(value)) }
        #expect(full.index(of: 65_536) == nil)
        #expect(full.index(of: 65_535) == 65_535)
        #expect(full.values.count == 65_536)
    }

    @Test("every kind of value is kept as it came")
    func values() {
        let values: [ReadingValue] = [
            .number(21.5), .number(-0.0), .bool(true), .bool(false), .null,
            .string("A4:C1:38:00:00:01"), .string(""), .numbers([0.5, 1]),
        ]
        for value in values {
            #expect(Attribute(name: 0, value: value, info: 0).value == value)
        }
        var attribute = Attribute(name: 3, value: .number(1), info: 2)
        attribute.value = .string("on")
        #expect(attribute.value == .string("on"))
        attribute.value = .string("on")
        #expect(attribute.value == .string("on"))
        // Equal is not enough to keep the old value: the new one's bytes are published.
        attribute.value = .string("caf\u{E9}")
        attribute.value = .string("cafe\u{301}")
        #expect(attribute.value.stringBytes == Array("cafe\u{301}".utf8))
        attribute.value = .numbers([0, 1])
        attribute.value = .numbers([-0.0, 1])
        #expect(attribute.value.numbers?.first?.sign == .minus)
        attribute.value = .null
        #expect(attribute.value == .null)
        #expect(attribute.name == 3 && attribute.info == 2)
    }

    @Test("names, unit/class pairs and formats are stored once each")
    func interning() {
        var table = AttributeTable()
        let temperature = table.nameIndex("temperature")
        let humidity = table.nameIndex("humidity")
        #expect(temperature != nil && humidity != nil && temperature != humidity)
        #expect(table.nameIndex(String("temper") + "ature") == temperature)
        #expect(table.nameCount == 2)
        #expect(table.name(humidity!) == "humidity")

        #expect(table.infoIndex(unit: nil, deviceClass: nil) == 0)
        let celsius = table.infoIndex(unit: "°C", deviceClass: .temperature)
        #expect(celsius != 0)
        #expect(table.infoIndex(unit: "°C", deviceClass: .temperature) == celsius)
        #expect(table.infoIndex(unit: "°C", deviceClass: nil) != celsius)
        #expect(table.info(celsius).unit == "°C" && table.info(celsius).deviceClass == .temperature)
        #expect(table.infoCount == 2)

        #expect(table.formatIndex(nil) == 0 && table.format(0) == nil)
        let bthome = table.formatIndex("BTHome v2")
        #expect(bthome != 0 && table.formatIndex("BTHome v2") == bthome && table.format(bthome) == "BTHome v2")
        #expect(table.formatIndex("ATC1441") != bthome)
    }

    @Test("merge keeps first-seen order, known units and one table entry per name")
    func merge() {
        var table = AttributeTable()
        var first = DeviceStates.State()
        var second = DeviceStates.State()
        #expect(first.merge([Reading(.temperature, 21.5), Reading("rssi_raw", 3)], table: &table))
        #expect(
            !first.merge([Reading(name: "temperature", value: .number(22)), Reading("rssi_raw", 4)], table: &table))
        #expect(second.merge([Reading(name: "mac", value: .string("x")), Reading(.temperature, 20)], table: &table))
        #expect(table.nameCount == 3)
        #expect(first.attributes.map { table.name($0.name) } == ["temperature", "rssi_raw"])
        #expect(first.attributes.map(\.value) == [.number(22), .number(4)])
        // The reading without a unit kept the known one.
        #expect(table.unit(first.attributes[0]) == "°C" && table.deviceClass(first.attributes[0]) == .temperature)
        #expect(table.reading(second.attributes[1]) == Reading(.temperature, 20))
        #expect(second.attributes[1].name == first.attributes[0].name, "one index per name across devices")

        var bytes: [UInt8] = []
        var timestamps = Timestamp.Cache()
        StatePayload.write(
            first.attributes, keys: table.keys, rssi: -60, lastSeen: nil, into: &bytes, timestamps: &timestamps)
        #expect(
            String(decoding: bytes, as: UTF8.self) == #"{"temperature":22,"rssi_raw":4,"rssi":-60,"linkquality":"#
                + String(LinkQuality.from(rssi: -60)) + "}")
    }

    @Test("optional fields kept with sentinels read back as set")
    func sentinels() {
        var record = DeviceRecord(
            address: BluetoothAddress("A4:C1:38:00:00:01")!, name: "a", stateTopic: "gattway/a", ruleIndex: 7)
        #expect(record.rssi == nil && record.lastSeenWall == nil && record.ruleIndex == 7)
        record.rssi = -128
        record.lastSeenWall = 0
        #expect(record.rssi == -128 && record.lastSeenWall == 0)
        record.rssi = 127
        record.lastSeenWall = 1_764_547_200_000
        #expect(record.rssi == 127 && record.lastSeenWall == 1_764_547_200_000)
        record.rssi = nil
        record.lastSeenWall = nil
        #expect(record.rssi == nil && record.lastSeenWall == nil)

        var tracker = AvailabilityTracker()
        #expect(tracker.lastAdvertisement == nil && tracker.learnedInterval == nil)
        tracker.advertisement(at: 10)
        tracker.advertisement(at: 11)
        #expect(tracker.lastAdvertisement == 11 && tracker.learnedInterval == nil)
        tracker.advertisement(at: 12)
        #expect(tracker.learnedInterval == 1)
        for time in 13...400 { tracker.advertisement(at: Double(time)) }
        #expect(tracker.learnedInterval == 1)
    }

    @Test(
        "service lists: one stored list per distinct list, new UUIDs appended in order, a full table keeps lists per device"
    )
    func serviceLists() {
        var lists = ServiceLists()
        let fcd2 = BluetoothUUID(0xFCD2), environmental = BluetoothUUID(0x181A), battery = BluetoothUUID(0x180F)
        #expect(MemoryLayout<ServiceList>.size <= 9)
        #expect(lists.list(.empty) == [])
        let first = lists.store([fcd2])
        #expect(first != .empty && lists.store([fcd2]) == first && lists.count == 2)
        #expect(lists.adding([fcd2], to: first) == nil, "nothing new: no list made")
        #expect(lists.adding([], to: first) == nil)
        let grown = lists.adding([battery, fcd2, environmental], to: first)
        #expect(grown.map { lists.list($0) } == [fcd2, battery, environmental])
        #expect(lists.store([fcd2, battery, environmental]) == grown)
        #expect(lists.count == 3)

        var index = 0
        while lists.count < ServiceLists.capacity {
            _ = lists.store([BluetoothUUID(UInt16(0x2000 + index))])
            index += 1
        }
        let own = lists.store([environmental, battery])
        #expect(own == .own([environmental, battery]))
        #expect(lists.list(own) == [environmental, battery])
        #expect(lists.count == ServiceLists.capacity)
        #expect(lists.store([fcd2]) == first, "known lists are still shared")
    }
}

extension ReadingValue {
    fileprivate var stringBytes: [UInt8]? {
        if case .string(let text) = self { return Array(text.utf8) }
        return nil
    }

    fileprivate var numbers: [Double]? {
        if case .numbers(let list) = self { return list }
        return nil
    }
}
