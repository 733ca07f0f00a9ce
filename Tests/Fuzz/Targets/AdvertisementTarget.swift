import Bluetooth
import JSON
import Parsers

extension FuzzTargets {
    /// Service data and manufacturer data from any device in radio range, with its local name,
    /// with and without a bind key, through the registry's dispatch (what `gattway run` and
    /// `gattway decode` do) and through every parser registered for the key on its own.
    ///
    /// Encoding: key choice (u16: one of the built-in parsers' keys, or any 16-bit UUID/company
    /// from the next u16 when the choice is past the list), flags (bit 0 a 16-byte bind key
    /// follows, bit 1 a 6-byte address, bit 2 a name chunk, bit 3 encrypt mode), then the payload.
    /// In encrypt mode the rest is a format choice and header (``AdvertisementEncryption``) and
    /// a plaintext, encrypted with the bind key as the device would: random ciphertext never
    /// passes the MIC, so without this the code after decryption would never run.
    static let advertisement = FuzzTarget(
        name: "advertisement",
        summary: "service data, manufacturer data and names through every advertisement parser",
        seeds: { AdvertisementSeeds.all },
        run: { bytes in
            var input = FuzzInput(bytes)
            let keys = AdvertisementSeeds.keys
            let choice = input.index(keys.count + 2)
            var key: AdvertisementKey
            if choice < keys.count {
                key = keys[choice]
            } else {
                let raw = input.uint16()
                key = choice == keys.count ? .serviceData(raw) : .manufacturer(raw)
            }
            let flags = input.byte()
            let bindKey = flags & 1 != 0 ? input.bytes(16) : nil
            let address = flags & 2 != 0 ? BluetoothAddress(octets: input.bytes(6)) : nil
            let name = flags & 4 != 0 ? input.string(limit: 40) : nil
            var payload: [UInt8]
            var sealed = false
            var context = AdvertisementContext(advertisement: AdvertisementData(), address: address, bindKey: bindKey)
            if flags & 8 != 0 {
                (key, payload, sealed) = AdvertisementEncryption.frame(&input, context: &context)
            } else {
                payload = input.rest()
            }
            var advertisement = AdvertisementData(localName: name, rssi: -60)
            switch key {
            case .serviceData(let uuid): advertisement.serviceData[BluetoothUUID(uuid)] = payload
            case .manufacturer(let company): advertisement.manufacturerData[company] = payload
            }
            context.advertisement = advertisement
            if let decoded = try? ParserRegistry.builtIn.decode(context) {
                checkReadings(decoded.readings, decoded.format)
            }
            for format in ParserRegistry.builtIn.advertisementFormats {
                guard let parser = ParserRegistry.builtIn.advertisementParser(format: format), parser.keys.contains(key)
                else { continue }
                do throws(ParseError) {
                    let readings = try parser.decode(payload, key: key, context: context)
                    checkReadings(readings ?? [], format)
                } catch {
                    let rejected = sealed && error.kind == .decryptionFailed
                    fuzzProperty(!rejected, "\(format) rejected a frame sealed as it decrypts: \(error)")
                }
            }
        })

    /// What every decoded reading must be, whatever the bytes: named, and publishable as JSON.
    static func checkReadings(_ readings: [Reading], _ source: String) {
        for reading in readings {
            fuzzProperty(!reading.name.isEmpty, "\(source) produced a reading without a name")
        }
    }
}

/// Seeds for ``FuzzTargets/advertisement``: every advertisement vector in `Tests/Fixtures`.
enum AdvertisementSeeds {
    /// Every key a built-in parser reads, in a fixed order.
    static let keys: [AdvertisementKey] = {
        var keys: [AdvertisementKey] = []
        for format in ParserRegistry.builtIn.advertisementFormats {
            for key in ParserRegistry.builtIn.advertisementParser(format: format)?.keys ?? [] where !keys.contains(key)
            {
                keys.append(key)
            }
        }
        return keys
    }()

    static let all: [[UInt8]] = {
        var seeds: [[UInt8]] = []
        for line in FixtureFiles.lines("advertisements.jsonl") {
            guard let object = try? JSONValue.parse(Array(line.utf8)) else { continue }
            let name: String? = if case .string(let text)? = object["name"] { text } else { nil }
            var payloads: [(AdvertisementKey, [UInt8])] = []
            if case .object(let members)? = object["service_data"] {
                for (uuid, value) in members {
                    if let short = BluetoothUUID(uuid)?.uint16, case .string(let hex) = value,
                        let bytes = Hex.decode(hex, separators: "")
                    {
                        payloads.append((.serviceData(short), bytes))
                    }
                }
            }
            if case .object(let members)? = object["manufacturer_data"] {
                for (company, value) in members {
                    if let id = UInt16(company), case .string(let hex) = value,
                        let bytes = Hex.decode(hex, separators: "")
                    {
                        payloads.append((.manufacturer(id), bytes))
                    }
                }
            }
            for (key, payload) in payloads {
                var builder = FuzzInputBuilder()
                if let index = keys.firstIndex(of: key) {
                    builder.index(index)
                } else {
                    switch key {
                    case .serviceData(let uuid): builder.index(keys.count); builder.uint16(uuid)
                    case .manufacturer(let company): builder.index(keys.count + 1); builder.uint16(company)
                    }
                }
                let bindKey: [UInt8]? =
                    if case .string(let hex)? = object["bindkey"] { Hex.decode(hex, separators: "") } else { nil }
                let address: BluetoothAddress? =
                    if case .string(let text)? = object["address"] { BluetoothAddress(text) } else { nil }
                builder.byte((name != nil ? 4 : 0) | (address != nil ? 2 : 0) | (bindKey != nil ? 1 : 0))
                if let bindKey { builder.rest(bindKey) }
                if let address { builder.rest(address.octets) }
                if let name { builder.string(name) }
                builder.rest(payload)
                seeds.append(builder.bytes)
                if let plaintext = AdvertisementEncryption.seed(key: key, payload: payload, address: address) {
                    seeds.append(plaintext)
                }
            }
        }
        return seeds
    }()
}
