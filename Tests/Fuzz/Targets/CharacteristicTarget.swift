import Bluetooth
import Gateway
import JSON
import Parsers

extension FuzzTargets {
    /// Characteristic values read or notified by a connected device, through the UUID dispatch
    /// and every built-in characteristic parser by name; and declarative parsers (config.json
    /// `parsers`) — a fuzzed definition read the way `gattway run` reads it (through
    /// ``GatewayConfig/parse(_:)``) and then applied to a fuzzed value as a characteristic parser,
    /// as an advertisement parser and through the config's registry.
    ///
    /// Encoding: a mode byte. Bit 0 clear: a UUID choice (u16: one of the built-in parsers'
    /// UUIDs, or the next u16 as a 16-bit UUID when past the list), then the value. Bit 0 set: a
    /// declarative parser — with bit 1 its JSON object as a length-prefixed (u16) text, else a
    /// structure (``DeclarativeDefinition``) — then the value.
    static let characteristic = FuzzTarget(
        name: "characteristic",
        summary:
            "characteristic values through every characteristic parser; fuzzed declarative parsers on fuzzed values",
        seeds: { CharacteristicSeeds.all },
        run: { bytes in
            var input = FuzzInput(bytes)
            let mode = input.byte()
            guard mode & 1 != 0 else {
                let uuids = CharacteristicSeeds.uuids
                let choice = input.index(uuids.count + 1)
                let uuid = choice < uuids.count ? uuids[choice] : BluetoothUUID(input.uint16())
                let value = input.rest()
                if let readings = try? ParserRegistry.builtIn.decode(characteristic: uuid, value: value) {
                    checkReadings(readings, uuid.description)
                }
                for name in CharacteristicSeeds.names {
                    guard let parser = ParserRegistry.builtIn.characteristicParser(named: name) else { continue }
                    if let readings = try? parser.decode(value) { checkReadings(readings, name) }
                }
                return
            }
            let definition: [UInt8]
            if mode & 2 != 0 {
                definition = input.bytes(Int(input.uint16()))
            } else {
                definition = Array(DeclarativeDefinition.read(&input).serialized.utf8)
            }
            let value = input.rest()
            let config: GatewayConfig
            do throws(GatewayConfigError) {
                config = try GatewayConfig.parse(
                    Array("{\"parsers\":{\"fuzzed\":".utf8) + definition + Array("}}".utf8))
            } catch {
                fuzzProperty(!error.problems.isEmpty, "a rejected parser definition without a problem")
                return
            }
            for parser in config.parsers {
                if let readings = try? parser.decode(value) { checkReadings(readings, parser.name) }
                for key in parser.keys {
                    var advertisement = AdvertisementData(rssi: -60)
                    switch key {
                    case .serviceData(let uuid): advertisement.serviceData[BluetoothUUID(uuid)] = value
                    case .manufacturer(let company): advertisement.manufacturerData[company] = value
                    }
                    let context = AdvertisementContext(advertisement: advertisement)
                    if let readings = try? parser.decode(value, key: key, context: context) {
                        checkReadings(readings, parser.name)
                    }
                    if let decoded = try? config.registry.decode(context) {
                        checkReadings(decoded.readings, decoded.format)
                    }
                }
                if let uuid = parser.uuid,
                    let readings = try? config.registry.decode(characteristic: uuid, value: value)
                {
                    checkReadings(readings, parser.name)
                }
            }
        })
}

/// Seeds for ``FuzzTargets/characteristic``: every vector of `Tests/Fixtures/characteristics.jsonl`
/// and the declarative parsers of config.json and the docs (as JSON text and as structures).
enum CharacteristicSeeds {
    /// The built-in characteristic parsers' names, sorted.
    static let names = ParserRegistry.builtIn.characteristicParserNames

    /// The UUIDs the built-in parsers are the default for, in the order of ``names``.
    static let uuids: [BluetoothUUID] = names.compactMap {
        ParserRegistry.builtIn.characteristicParser(named: $0)?.uuid
    }

    static let all: [[UInt8]] = {
        var seeds: [[UInt8]] = []
        for line in FixtureFiles.lines("characteristics.jsonl") {
            guard let object = try? JSONValue.parse(Array(line.utf8)), case .string(let text)? = object["uuid"],
                let uuid = BluetoothUUID(text), case .string(let hex)? = object["hex"],
                let value = Hex.decode(hex, separators: "")
            else { continue }
            var builder = FuzzInputBuilder()
            builder.byte(0)
            if let index = uuids.firstIndex(of: uuid) {
                builder.index(index)
            } else {
                builder.index(uuids.count)
                builder.uint16(uuid.uint16 ?? 0)
            }
            builder.rest(value)
            seeds.append(builder.bytes)
        }
        let sample: [UInt8] = [0x01, 0x02, 0x66, 0x08, 0x5F, 0x34, 0x12, 0x00, 0x41, 0x42, 0x43, 0xFF, 0x07]
        for definition in DeclarativeDefinition.repositoryDefinitions() {
            var builder = FuzzInputBuilder()
            builder.byte(3)
            builder.uint16(UInt16(clamping: definition.count))
            builder.rest(definition)
            builder.rest(sample)
            seeds.append(builder.bytes)
        }
        seeds += DeclarativeDefinition.structuredSeeds.map { $0 + sample }
        return seeds
    }()
}
