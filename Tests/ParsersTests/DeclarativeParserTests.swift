import Bluetooth
import JSON
import Parsers
import Testing

@Suite("Declarative parsers from config.json")
struct DeclarativeParserTests {
    static func json(_ text: String) -> JSONValue { (try? JSONValue.parse(Array(text.utf8))) ?? .object([]) }

    @Test("a parser from config decodes advertisement fields with scale, offset and unit")
    func decodes() throws {
        let parsers = try DeclarativeParser.parsers(
            fromJSON: Self.json(
                """
                {"my_sensor": {"match": {"manufacturer_id": 4660}, "fields": [
                  {"name": "temperature", "offset": 1, "type": "s16le", "scale": 0.01, "unit": "°C", "device_class": "temperature"},
                  {"name": "battery", "offset": 3, "type": "u8", "value_offset": -1, "unit": "%"},
                  {"name": "label", "offset": 4, "type": "utf8"}]}}
                """))
        var registry = ParserRegistry.builtIn
        for parser in parsers { registry.register(parser as any AdvertisementParser) }
        let ad = AdvertisementData(manufacturerData: [0x1234: [0x00, 0x29, 0x09, 0x65, 0x41, 0x42]])
        let decoded = try registry.decode(AdvertisementContext(advertisement: ad))
        #expect(decoded.format == "my_sensor")
        #expect(decoded.readings.map(\.value) == [.number(23.45), .number(100), .string("AB")])
        #expect(decoded.readings.first?.deviceClass == .temperature)
        let short = #expect(throws: ParseError.self) {
            try registry.decode(
                AdvertisementContext(advertisement: AdvertisementData(manufacturerData: [0x1234: [0, 1]])))
        }
        #expect(short?.kind == .tooShort)
    }

    @Test("a unit and a device class only config names come out as written, and equal the built-in ones")
    func configUnitsAndClasses() throws {
        let parsers = try DeclarativeParser.parsers(
            fromJSON: Self.json(
                """
                {"tank": {"match": {"manufacturer_id": 4661}, "fields": [
                  {"name": "level", "offset": 0, "type": "u8", "unit": "furlong/fortnight", "device_class": "tank_level_x"},
                  {"name": "temperature", "offset": 1, "type": "u8", "unit": "°C", "device_class": "temperature"}]}}
                """))
        var registry = ParserRegistry.builtIn
        for parser in parsers { registry.register(parser as any AdvertisementParser) }
        let ad = AdvertisementData(manufacturerData: [0x1235: [7, 21]])
        let readings = try registry.decode(AdvertisementContext(advertisement: ad)).readings
        #expect(readings.map(\.unit) == ["furlong/fortnight", "°C"])
        #expect(readings.map { $0.deviceClass?.rawValue } == ["tank_level_x", "temperature"])
        // The same text is the same unit and class as the built-in parsers'.
        #expect(readings[1].unitCode == .celsius)
        #expect(readings[1].deviceClass == .temperature)
        #expect(readings[1] == Reading(.temperature, 21))
        #expect(readings[0].unitCode != .celsius)
        var changed = readings[0]
        changed.unit = "°C"
        #expect(changed.unitCode == .celsius)
        changed.unit = nil
        #expect(changed.unitCode == nil && changed.unit == nil)
    }

    @Test(
        "config errors name the JSON path",
        arguments: [
            (
                #"{"s": {"fields": [{"name": "t", "offset": 0, "type": "u12"}]}}"#,
                "parsers.s.fields[0].type: \"u12\" is not a field type"
            ),
            (#"{"s": {"fields": []}}"#, "parsers.s.fields: expected a non-empty list"),
            (
                #"{"s": {"match": {"manufacturer_id": 70000}, "fields": [{"name": "t", "offset": 0, "type": "u8"}]}}"#,
                "parsers.s.match.manufacturer_id: 70000 is not a company id"
            ),
            (#"{"s": {"fields": [{"name": "t", "offset": -1, "type": "u8"}]}}"#, "parsers.s.fields[0].offset"),
            (#"{"s": {"fields": [{"name": "t", "offset": 1.5, "type": "u8"}]}}"#, "parsers.s.fields[0].offset"),
            (#"{"s": {"fields": [{"name": "t", "offset": "1", "type": "u8"}]}}"#, "parsers.s.fields[0].offset"),
            (#"{"s": {"fields": [{"offset": 0, "type": "u8"}]}}"#, "parsers.s.fields[0].name: expected a non-empty"),
            (#"{"s": {"fields": [3]}}"#, "parsers.s.fields[0]: expected an object"),
            (#"{"s": {"fields": [{"name": "t", "offset": 0}]}}"#, "parsers.s.fields[0].type: \"\" is not a field type"),
            (
                #"{"s": {"fields": [{"name": "t", "offset": 0, "type": "u8", "scale": "2"}]}}"#,
                "parsers.s.fields[0].scale: expected a number"
            ),
            (
                #"{"s": {"fields": [{"name": "t", "offset": 0, "type": "hex", "length": null}]}}"#,
                "parsers.s.fields[0].length: expected a length"
            ),
            (
                #"{"s": {"match": [], "fields": [{"name": "t", "offset": 0, "type": "u8"}]}}"#,
                "parsers.s.match: expected an object"
            ),
            (
                #"{"s": {"match": {}, "fields": [{"name": "t", "offset": 0, "type": "u8"}]}}"#,
                "parsers.s.match: expected manufacturer_id"
            ),
            (
                #"{"s": {"match": {"manufacturer_id": 1.5}, "fields": [{"name": "t", "offset": 0, "type": "u8"}]}}"#,
                "parsers.s.match.manufacturer_id: 1.5 is not a company id"
            ),
            (
                #"{"s": {"match": {"service_data": "12345678"}, "fields": [{"name": "t", "offset": 0, "type": "u8"}]}}"#,
                "parsers.s.match.service_data: \"12345678\" is not a 16-bit service UUID"
            ),
            (
                #"{"s": {"characteristic": 42, "fields": [{"name": "t", "offset": 0, "type": "u8"}]}}"#,
                "parsers.s.characteristic: \"42\" is not a UUID"
            ),
            (#"{"s": 1}"#, "parsers.s: expected an object"),
            (#"[]"#, "parsers: expected an object"),
        ])
    func errors(_ text: String, _ prefix: String) {
        do {
            _ = try DeclarativeParser.parsers(fromJSON: Self.json(text))
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.description.hasPrefix(prefix), "\(error.description)")
        }
    }

    @Test(
        "a characteristic parser from JSON values: integral numbers as offsets and lengths, a hex field, the name order"
    )
    func characteristicParser() throws {
        let parsers = try DeclarativeParser.parsers(
            fromJSON: Self.json(
                """
                {"z_meter": {"characteristic": "2A6E", "fields": [
                  {"name": "raw", "offset": 1.0, "type": "hex", "length": 2, "unit": 7},
                  {"name": "level", "offset": 0, "type": "u8", "scale": 2, "value_offset": 0.5}]},
                 "a_other": {"fields": [{"name": "x", "offset": 0, "type": "u8"}]}}
                """))
        #expect(parsers.map(\.name) == ["a_other", "z_meter"])
        let meter = try #require(parsers.last)
        #expect(meter.uuid == BluetoothUUID(0x2A6E) && meter.keys.isEmpty)
        let readings = try meter.decode([0x10, 0xAB, 0xCD, 0xEF])
        #expect(readings.map(\.value) == [.string("abcd"), .number(32.5)])
        #expect(readings.first?.unit == nil, "a unit that is not a string is left out")
    }
}
