import Bluetooth
import Parsers
import Retry
import Testing

/// SwitchBot, Qingping, Sensirion, ThermoPro and Inkbird: the cases the vectors do not pin down.
@Suite("SwitchBot, Qingping, Sensirion, ThermoPro, Inkbird parsers")
struct SensorVendorParserTests {
    static func decode(
        service: [UInt16: String] = [:], manufacturer: [UInt16: String] = [:], name: String? = nil,
        address: String? = nil
    ) throws(ParseError) -> DecodedAdvertisement {
        var ad = AdvertisementData(localName: name)
        for (uuid, hex) in service { ad.serviceData[BluetoothUUID(uuid)] = [UInt8](hexString: hex) }
        for (company, hex) in manufacturer { ad.manufacturerData[company] = [UInt8](hexString: hex) }
        return try ParserRegistry.builtIn.decode(
            AdvertisementContext(advertisement: ad, address: address.flatMap { BluetoothAddress($0) }))
    }

    static func value(_ decoded: DecodedAdvertisement, _ name: String) -> ReadingValue? {
        decoded.readings.first { $0.name == name }?.value
    }

    @Test("a parser that reads the company id gets every id, after the parsers registered for it")
    func anyCompanyRegistry() throws {
        struct CompanyEcho: AdvertisementParser {
            var format: String { "company_echo" }
            var keys: [AdvertisementKey] { [] }
            var readsCompanyID: Bool { true }
            func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext) throws(ParseError)
                -> [Reading]?
            {
                guard case .manufacturer(let company) = key else { return nil }
                return [Reading("company", Double(company))]
            }
        }
        var registry = ParserRegistry.builtIn
        registry.register(CompanyEcho())
        let any = AdvertisementData(manufacturerData: [0x4321: [1, 2]])
        let decoded = try registry.decode(AdvertisementContext(advertisement: any))
        #expect(decoded.format == "company_echo")
        #expect(decoded.readings == [Reading("company", Double(0x4321))])
        // Ruuvi's own parser for 0x0499 claims its frame first.
        let ruuvi = AdvertisementData(manufacturerData: [0x0499: [UInt8](hexString: "03291A1ECE1EFC18F94202CA0B53")])
        #expect(try registry.decode(AdvertisementContext(advertisement: ruuvi)).format == "ruuvi_rawv1")
    }
}
