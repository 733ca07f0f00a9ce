import Bluetooth

/// All parsers the gateway knows, and the lookups it uses: characteristic parser by UUID or by
/// name, advertisement parser by where its payload lives.
///
/// Built-in parsers are in ``ParserRegistry/builtIn``; Swift plugins and declarative parsers from
/// config.json are added with ``register(_:)-…`` (plugins registered later are tried first, so a
/// plugin can override a built-in format). The registry is a value: build it once at start, then
/// share it freely across threads.
public struct ParserRegistry: Sendable {
    private var characteristicByUUID: [BluetoothUUID: any CharacteristicParser] = [:]
    private var characteristicByName: [String: any CharacteristicParser] = [:]
    private var advertisementParsers: [any AdvertisementParser] = []
    /// Parsers per key, in the order they are tried, found by binary search in ``keyCodes``
    /// (sorted, one ``AdvertisementKey/code`` per entry): with the built-ins' sixty-odd keys this
    /// is a handful of integer compares per payload, cheaper than hashing or a linear scan.
    private var keyCodes: [UInt32] = []
    private var byKey: [[any AdvertisementParser]] = []
    /// Parsers offered any manufacturer-data payload after the ones for its company id declined
    /// (``AdvertisementParser/acceptsAnyCompanyID``), latest registered first.
    private var anyCompany: [any AdvertisementParser] = []

    /// An empty registry.
    public init() {}

    /// The built-in SIG characteristics and advertisement formats.
    public static let builtIn: ParserRegistry = {
        var registry = ParserRegistry()
        for parser in BuiltInParsers.characteristics { registry.register(parser) }
        for parser in BuiltInParsers.advertisements { registry.register(parser) }
        return registry
    }()

    /// Adds a characteristic parser; it becomes the default for its UUID and is found by name.
    public mutating func register(_ parser: any CharacteristicParser) {
        if let uuid = parser.uuid { characteristicByUUID[uuid] = parser }
        characteristicByName[parser.name] = parser
    }

    /// Adds an advertisement parser, tried before the ones registered earlier for the same key.
    public mutating func register(_ parser: any AdvertisementParser) {
        advertisementParsers.append(parser)
        if parser.acceptsAnyCompanyID { anyCompany.insert(parser, at: 0) }
        for key in parser.keys {
            let code = key.code
            if let slot = slot(of: code) {
                byKey[slot].insert(parser, at: 0)
            } else {
                let position = keyCodes.firstIndex { $0 > code } ?? keyCodes.count
                keyCodes.insert(code, at: position)
                byKey.insert([parser], at: position)
            }
        }
    }

    /// The default parser for a characteristic UUID.
    public func characteristicParser(for uuid: BluetoothUUID) -> (any CharacteristicParser)? {
        characteristicByUUID[uuid]
    }

    /// A characteristic parser by its config name (`battery_level`, or a declarative parser's name).
    public func characteristicParser(named name: String) -> (any CharacteristicParser)? {
        characteristicByName[name]
    }

    /// The advertisement parser with this format name.
    public func advertisementParser(format: String) -> (any AdvertisementParser)? {
        advertisementParsers.first { $0.format == format }
    }

    /// Names of all characteristic parsers, sorted.
    public var characteristicParserNames: [String] { characteristicByName.keys.sorted() }

    /// Format names of all advertisement parsers, in registration order.
    public var advertisementFormats: [String] { advertisementParsers.map(\.format) }

    /// Decodes a characteristic value with the default parser for its UUID.
    public func decode(characteristic uuid: BluetoothUUID, value: [UInt8]) throws(ParseError) -> [Reading] {
        guard let parser = characteristicByUUID[uuid] else {
            throw ParseError(.unknownFormat, "no parser for characteristic \(uuid.shortDescription)")
        }
        return try parser.decode(value)
    }

    /// Finds the format of an advertisement and decodes it.
    ///
    /// Every payload in the advertisement (manufacturer data and service data) is offered to the
    /// parsers registered for its key; the first parser that claims a payload decides the result.
    /// Service data is tried before manufacturer data, and within each in ascending key order,
    /// so the choice does not depend on dictionary order. Manufacturer data no parser of its
    /// company id claims is offered to the parsers that read the company id (Inkbird IBS-TH,
    /// ThermoPro). Throws `unknown_format` when no parser claims anything, or the claiming
    /// parser's error.
    public func decode(_ context: borrowing AdvertisementContext) throws(ParseError) -> DecodedAdvertisement {
        let entries = context.advertisement.serviceData.count + context.advertisement.manufacturerData.count
        if entries == 1 {
            // Fast path: the common single-payload advertisement, no ordering needed.
            if let (uuid, payload) = context.advertisement.serviceData.first, let short = uuid.uint16 {
                if let result = try decode(payload, key: .serviceData(short), context: context) { return result }
            } else if let (company, payload) = context.advertisement.manufacturerData.first {
                if let result = try decode(payload, key: .manufacturer(company), context: context) { return result }
            }
        } else if entries > 1 {
            // A payload that fails does not hide a later one that decodes; the first error is
            // reported when nothing decodes.
            var firstError: ParseError?
            let services = context.advertisement.serviceData.sorted(by: { $0.key < $1.key })
            let manufacturers = context.advertisement.manufacturerData.sorted(by: { $0.key < $1.key })
            for generic in [false, true] {
                for (uuid, payload) in services {
                    guard let short = uuid.uint16 else { continue }
                    do {
                        if let result = try decode(
                            payload, key: .serviceData(short), context: context, generic: generic)
                        {
                            return result
                        }
                    } catch {
                        if firstError == nil { firstError = error }
                    }
                }
                for (company, payload) in manufacturers {
                    do {
                        if let result = try decode(
                            payload, key: .manufacturer(company), context: context, generic: generic)
                        {
                            return result
                        }
                    } catch {
                        if firstError == nil { firstError = error }
                    }
                }
            }
            if let firstError { throw firstError }
        }
        throw ParseError(.unknownFormat, "no parser recognises this advertisement")
    }

    @inline(__always)
    private func decode(
        _ payload: [UInt8], key: AdvertisementKey, context: borrowing AdvertisementContext, generic: Bool? = nil
    )
        throws(ParseError) -> DecodedAdvertisement?
    {
        if let slot = slot(of: key.code) {
            for parser in byKey[slot] {
                if let generic, parser.isGeneric != generic { continue }
                if let readings = try parser.decode(payload, key: key, context: context) {
                    return Self.decoded(parser, readings, payload: payload, key: key)
                }
            }
        }
        guard case .manufacturer = key else { return nil }
        for parser in anyCompany {
            if let generic, parser.isGeneric != generic { continue }
            if let readings = try parser.decode(payload, key: key, context: context) {
                return Self.decoded(parser, readings, payload: payload, key: key)
            }
        }
        return nil
    }

    @inline(__always)
    private static func decoded(
        _ parser: any AdvertisementParser, _ readings: [Reading], payload: [UInt8], key: AdvertisementKey
    ) -> DecodedAdvertisement {
        let counter = parser.frameCounter(payload, readings: readings)
        return DecodedAdvertisement(
            format: parser.format, readings: readings,
            frame: DecodedAdvertisement.frame(counter: counter, key: key, payload: payload))
    }

    /// The entry of a key code in ``keyCodes``, by binary search.
    @inline(__always)
    private func slot(of code: UInt32) -> Int? {
        var low = 0
        var high = keyCodes.count
        while low < high {
            let middle = (low &+ high) >> 1
            let probe = keyCodes[middle]
            if probe == code { return middle }
            if probe < code { low = middle &+ 1 } else { high = middle }
        }
        return nil
    }
}

extension AdvertisementKey {
    /// The key as one integer: the kind in the high half, the company id or UUID in the low.
    var code: UInt32 {
        switch self {
        case .manufacturer(let company): UInt32(company)
        case .serviceData(let uuid): 0x1_0000 | UInt32(uuid)
        }
    }
}
