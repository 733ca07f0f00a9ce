import Bluetooth
import Gateway
import JSON
import Parsers

extension FuzzTargets {
    /// What the radio hears, as the radio's view (`mqtt.raw_advertisements`, the page) keeps and
    /// publishes it: reports of any AD bytes from a few or many addresses (rotating), on any
    /// adapter index, with any outcome. Properties: no trap; the view stays within its bound;
    /// every entry's JSON is valid JSON that gives back its name (escaped), with at most
    /// ``RadioView/maxDataLength`` bytes of data; a suggested rule is config that parses.
    ///
    /// Encoding, per report until the input ends: an address byte (below 0xF0 one of 16 fixed
    /// addresses, else 6 more bytes), adapter, RSSI (s8), outcome, a flag (bit 0: the bytes are
    /// the controller's, else a D-Bus report; bit 2: a random address; bit 3: content taken at
    /// most once a second, ``RadioView/contentInterval``; bits 4-7: seconds since the last
    /// report), then a chunk of AD bytes (length byte; 0xFF and
    /// bit 1 of the flag: up to 1,500 bytes, as extended advertising may carry).
    static let radioView = FuzzTarget(
        name: "radio-view",
        summary: "advertising reports of any bytes and addresses through the radio's view and its JSON",
        seeds: { RadioViewSeeds.all },
        run: { bytes in
            var input = FuzzInput(bytes)
            let view = RadioView(maxAddresses: 8, window: 60)
            let config = GatewayConfig()
            var now = 0.0
            while !input.isEmpty {
                let pick = input.byte()
                let address =
                    pick < 0xF0
                    ? BluetoothAddress(rawValue: 0xC0_00_00_00_00_00 | UInt64(pick & 0x0F))
                    : BluetoothAddress(rawValue: input.bytes(6).reduce(0) { $0 << 8 | UInt64($1) })
                let adapter = input.byte()
                let rssi = Int16(Int8(bitPattern: input.byte()))
                let outcomes = RadioOutcome.allCases
                let outcome = outcomes[Int(input.byte()) % outcomes.count]
                let flags = input.byte()
                let data = flags & 2 != 0 ? input.bytes(Int(input.uint16()) % 1501) : input.chunk()
                var advertisement = AdvertisementData(advertisingData: data)
                advertisement.rssi = rssi
                let discovery = BLEDiscovery(
                    address: address, advertisement: advertisement, adapter: adapter,
                    data: flags & 1 != 0 ? data : nil, addressType: flags & 4 != 0 ? .random : nil)
                now += Double(flags >> 4)
                // Bit 3: the page's view alone (a report's content taken at most once a second).
                view.contentInterval = flags & 8 != 0 ? 1 : 0
                view.note(
                    discovery, outcome: outcome, decode: outcome.isUntracked ? nil : outcome, parser: nil,
                    device: nil, now: now, wall: Int64(saturating: now * 1000)
                ) { report in
                    do {
                        let decoded = try ParserRegistry.builtIn.decode(
                            AdvertisementContext(advertisement: report.advertisement, address: report.address))
                        return (.decoded, decoded.format)
                    } catch {
                        return (.unknownFormat, nil)
                    }
                }
                fuzzProperty(view.count <= 8, "the view holds \(view.count) addresses, beyond its bound of 8")
            }
            for entry in view.snapshot(now: now).entries {
                fuzzProperty(entry.data.count <= RadioView.maxDataLength, "\(entry.data.count) data bytes kept")
                var text: [UInt8] = []
                entry.json(adapters: ["hci0", "hci1"]).write(into: &text)
                let parsed = try? JSONValue.parse(text)
                fuzzProperty(parsed != nil, "an entry's JSON does not parse: \(String(decoding: text, as: UTF8.self))")
                if let name = entry.name {
                    fuzzProperty(name.count <= RadioView.maxNameLength, "a name of \(name.count) characters")
                    fuzzProperty(parsed?["name"] == .string(name), "the name does not come back from the JSON")
                }
                if let suggestion = RuleSuggestion.suggest(for: entry, config: config) {
                    var rule: [UInt8] = []
                    suggestion.rule.write(into: &rule)
                    let document = Array(#"{"devices": ["#.utf8) + rule + Array("]}".utf8)
                    fuzzProperty(
                        (try? GatewayConfig.parse(document)) != nil,
                        "a suggested rule is not valid config: \(String(decoding: rule, as: UTF8.self))")
                }
            }
        })
}

enum RadioViewSeeds {
    /// A BTHome sensor heard by two adapters, a name with quotes, a rotating address, a long report.
    static let all: [[UInt8]] = {
        let bthome: [UInt8] = [0x02, 0x01, 0x06, 0x09, 0x16, 0xD2, 0xFC, 0x40, 0x00, 0x01, 0x02, 0xCA, 0x09]
        let named: [UInt8] = [0x06, 0x09, 0x61, 0x22, 0x5C, 0x00, 0x0A, 0x04, 0xFF, 0xFE, 0xFF, 0x01]
        var seeds: [[UInt8]] = []
        seeds.append([0x01, 0x00, 0xC4, 0x00, 0x11, UInt8(bthome.count)] + bthome)
        seeds.append(
            [0x01, 0x00, 0xC4, 0x00, 0x11, UInt8(bthome.count)] + bthome + [
                0x01, 0x01, 0xB0, 0x0C, 0x10, UInt8(bthome.count),
            ]
                + bthome)
        seeds.append([0x02, 0x00, 0xC4, 0x09, 0x05, UInt8(named.count)] + named)
        var rotating: [UInt8] = []
        for index: UInt8 in 0..<20 {
            rotating += [0xF0, 0xC0, 0, 0, 0, 0, index, 0x00, 0xA0, 0x0A, 0x15, UInt8(bthome.count)] + bthome
        }
        seeds.append(rotating)
        seeds.append([0x03, 0x00, 0xC4, 0x00, 0x03, 0xDC, 0x05] + [UInt8](repeating: 0x1F, count: 1500))
        return seeds
    }()
}
