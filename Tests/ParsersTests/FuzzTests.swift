import Bluetooth
import Parsers
import Retry
import Testing

/// A seeded random loop over every parser: random bytes, truncations and single-byte mutations
/// of real vectors. Passing means no trap; errors are fine.
@Suite("Parsers never trap")
struct FuzzTests {
    static let key: [UInt8] = Array(0..<16)
    static let address = BluetoothAddress("A4:C1:38:0B:12:34")

    /// Real payloads per key from the vectors, used as mutation seeds.
    static let seeds: [(AdvertisementKey, [UInt8])] = Fixtures.advertisements.flatMap {
        line -> [(AdvertisementKey, [UInt8])] in
        let object = line.json
        var out: [(AdvertisementKey, [UInt8])] = []
        for (uuid, hex) in object["service_data"] as? [String: String] ?? [:] {
            if let short = BluetoothUUID(uuid)?.uint16 { out.append((.serviceData(short), [UInt8](hexString: hex))) }
        }
        for (company, hex) in object["manufacturer_data"] as? [String: String] ?? [:] {
            if let id = UInt16(company) { out.append((.manufacturer(id), [UInt8](hexString: hex))) }
        }
        return out
    }

    @Test(
        "advertisement parsers survive random, truncated and mutated payloads",
        arguments: ParserRegistry.builtIn.advertisementFormats)
    func advertisements(_ format: String) throws {
        let parser = try #require(ParserRegistry.builtIn.advertisementParser(format: format))
        var random = SplitMix64(seed: UInt64(format.utf8.reduce(0) { $0 &* 31 &+ UInt64($1) }))
        // Names some parsers gate on (Govee, Sensor Easy, Radioland, Oria).
        let names = [
            nil, "GVH5075_1234", "Govee_H5074_1", "GVH5106_1", "P T EN 1", "P RHT 1", "P MAG 1", "RDL52832", "T301",
            "GVH5055", "GV5140", "GV5112", "GV5123", "TP357 (1A2B)", "TP393", "sps", "tps", "WoSensorTH",
        ]
        var inputs: [[UInt8]] = (0..<3000).map { _ in
            (0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
        }
        for (key, payload) in Self.seeds where parser.keys.contains(key) {
            for length in 0...payload.count { inputs.append(Array(payload.prefix(length))) }
            for _ in 0..<50 where !payload.isEmpty {
                var mutated = payload
                mutated[Int.random(in: 0..<payload.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                inputs.append(mutated)
            }
        }
        // A payload starting with a plausible header reaches deeper code.
        for prefix: [UInt8] in [
            [0x40], [0x41], [0x42], [0x43], [0x44], [0x58, 0x58], [0x50, 0x20], [0x05], [0x03],
            [0x02, 0x15], [0x00], [0x10], [0x20, 0x00], [0x20, 0x01], [0x21, 0x01, 0x0F], [0x01, 0x01],
            [0xEC, 0x00], [0xF2], [0x4F, 0x54, 0x4F], [0x08, 0x0C], [0x60], [0x70], [0x11], [0x21],
        ] {
            for _ in 0..<300 {
                inputs.append(
                    prefix
                        + (0..<Int.random(in: 0...30, using: &random)).map { _ in
                            UInt8.random(in: 0...255, using: &random)
                        })
            }
        }
        var decoded = 0
        for (index, payload) in inputs.enumerated() {
            // Some parsers also read a second payload of the advertisement (Sensor Easy's battery,
            // Radioland's iBeacon): every fourth input is offered there too.
            let companion: [UInt16: [UInt8]] = index % 4 == 0 ? [0x004C: payload, 0x0757: payload] : [:]
            let context = AdvertisementContext(
                advertisement: AdvertisementData(localName: names[index % names.count], manufacturerData: companion),
                address: index % 3 == 0 ? nil : Self.address,
                bindKey: index % 2 == 0 ? Self.key : nil)
            // A parser that takes any company id is fed under an arbitrary one and under one whose
            // low byte some of them recognise (ThermoPro's C2).
            let anyCompany: [AdvertisementKey] =
                parser.acceptsAnyCompanyID
                ? [
                    .manufacturer(UInt16(truncatingIfNeeded: index &* 40503)),
                    .manufacturer(UInt16(index & 0xFF) << 8 | 0xC2),
                ]
                : []
            for key in parser.keys + anyCompany {
                if (try? parser.decode(payload, key: key, context: context)) != nil { decoded += 1 }
            }
        }
        #expect(inputs.count > 3000)
        _ = decoded
    }

    @Test(
        "characteristic parsers survive random and truncated values",
        arguments: ParserRegistry.builtIn.characteristicParserNames)
    func characteristics(_ name: String) throws {
        let parser = try #require(ParserRegistry.builtIn.characteristicParser(named: name))
        var random = SplitMix64(seed: UInt64(name.utf8.count))
        for _ in 0..<5000 {
            let value = (0..<Int.random(in: 0...24, using: &random)).map { _ in
                UInt8.random(in: 0...255, using: &random)
            }
            for length in [value.count, value.count / 2, 1, 0] where length <= value.count {
                _ = try? parser.decode(Array(value.prefix(length)))
            }
        }
        for line in Fixtures.characteristics {
            let bytes = [UInt8](hexString: line.json["hex"] as? String ?? "")
            for length in 0...bytes.count { _ = try? parser.decode(Array(bytes.prefix(length))) }
        }
    }

    @Test("the decode line logic survives malformed lines")
    func lines() {
        let decoder = VectorLineDecoder()
        let lines = [
            "", "{", "[]", "null", "{\"uuid\":\"zz\",\"hex\":\"00\"}", "{\"uuid\":\"2A19\",\"hex\":\"0\"}",
            "{\"service_data\":{\"x\":\"00\"}}", "{\"manufacturer_data\":{\"99999\":\"00\"}}",
            "{\"manufacturer_data\":{\"1177\":\"05\"}}", "{\"service_data\":{\"fcd2\":\"41\"},\"bindkey\":\"00\"}",
            "{\"name\":\"x\"}",
        ]
        for line in lines {
            let output = decoder.decode(line: line)
            #expect(output.hasPrefix("{\"error\":"), "\(line) → \(output)")
        }
    }
}
