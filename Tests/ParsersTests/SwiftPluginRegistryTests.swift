import Bluetooth
import Parsers
import Testing

/// `ParserRegistry.builtIn(adding:_:)`, what `Gattway.main(parsers:advertisementParsers:)` makes the
/// process's registry from (docs/parsers.md, "Your own Swift parsers"): the order and override rules.
@Suite("Swift parsers of a user's package")
struct SwiftPluginRegistryTests {
    /// Claims every BTHome payload whose first byte is `claimFirstByte`, declines the rest.
    struct BTHomeShadow: AdvertisementParser {
        var format: String
        var claimFirstByte: UInt8
        var keys: [AdvertisementKey] { [.serviceData(0xFCD2)] }
        func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext) throws(ParseError)
            -> [Reading]?
        {
            payload.first == claimFirstByte ? [Reading("claimed", Double(payload.count))] : nil
        }
    }

    /// A characteristic parser with the name and UUID of the built-in battery_level.
    struct Battery: CharacteristicParser {
        var name: String { "battery_level" }
        var uuid: BluetoothUUID? { BluetoothUUID(0x2A19) }
        func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] { [Reading("mine", 1)] }
    }

    /// A parser chosen by name only.
    struct ByName: CharacteristicParser {
        var name: String { "by_name" }
        var uuid: BluetoothUUID? { nil }
        func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] { [Reading("by_name", 2)] }
    }

    /// BTHome v2, temperature 25.06 °C and humidity 50.55 % (docs/parsers.md, `gattway decode`).
    static let bthome = AdvertisementData(serviceData: [
        BluetoothUUID(0xFCD2): [0x40, 0x02, 0xCA, 0x09, 0x03, 0xBF, 0x13]
    ])

    @Test("an advertisement parser of the user is tried before the built-ins for its key")
    func advertisementFirst() throws {
        let registry = ParserRegistry.builtIn(adding: [], [BTHomeShadow(format: "shadow", claimFirstByte: 0x40)])
        #expect(try registry.decode(AdvertisementContext(advertisement: Self.bthome)).format == "shadow")
        #expect(
            try ParserRegistry.builtIn.decode(AdvertisementContext(advertisement: Self.bthome)).format == "bthome_v2")
        #expect(registry.advertisementFormats.last == "shadow")
    }

    @Test("a payload the user's parser declines still reaches the built-in")
    func declinedFallsThrough() throws {
        let registry = ParserRegistry.builtIn(adding: [], [BTHomeShadow(format: "shadow", claimFirstByte: 0x99)])
        let decoded = try registry.decode(AdvertisementContext(advertisement: Self.bthome))
        #expect(decoded.format == "bthome_v2")
        #expect(decoded.readings.map(\.name) == ["temperature", "humidity"])
    }

    @Test("later parsers of the list are tried before earlier ones")
    func laterFirst() throws {
        let registry = ParserRegistry.builtIn(
            adding: [],
            [BTHomeShadow(format: "first", claimFirstByte: 0x40), BTHomeShadow(format: "second", claimFirstByte: 0x40)])
        #expect(try registry.decode(AdvertisementContext(advertisement: Self.bthome)).format == "second")
    }

    @Test("a characteristic parser replaces the built-in of its name and UUID; one without a UUID is found by name")
    func characteristicOverride() throws {
        let registry = ParserRegistry.builtIn(adding: [Battery(), ByName()], [])
        #expect(try registry.decode(characteristic: BluetoothUUID(0x2A19), value: [0x55]).map(\.name) == ["mine"])
        #expect(try registry.characteristicParser(named: "battery_level")?.decode([0x55]).map(\.name) == ["mine"])
        #expect(try registry.characteristicParser(named: "by_name")?.decode([]).map(\.name) == ["by_name"])
        #expect(registry.characteristicParserNames.contains("by_name"))
        #expect(ParserRegistry.builtIn.characteristicParser(named: "by_name") == nil)
        #expect(
            try ParserRegistry.builtIn.decode(characteristic: BluetoothUUID(0x2A19), value: [0x55]).map(\.name) == [
                "battery"
            ])
    }
}
