import Bluetooth

/// Which part of an advertisement a parser reads.
public enum AdvertisementKey: Sendable, Hashable {
    /// Manufacturer-specific data of this company id (the id itself is not in the payload).
    case manufacturer(UInt16)
    /// Service data of this 16-bit service UUID (the UUID is not in the payload).
    case serviceData(UInt16)
}

/// Everything a parser may need besides its payload: the rest of the advertisement (for model
/// detection by name), the device address (nonces, MAC checks) and the device's bind key.
public struct AdvertisementContext: Sendable {
    public var advertisement: AdvertisementData
    public var address: BluetoothAddress?
    /// The 16-byte AES key for encrypted formats (BTHome, MiBeacon, pvvx), when configured.
    public var bindKey: [UInt8]?

    public init(advertisement: AdvertisementData, address: BluetoothAddress? = nil, bindKey: [UInt8]? = nil) {
        self.advertisement = advertisement
        self.address = address
        self.bindKey = bindKey
    }
}

/// Decodes one advertisement format.
///
/// The registry hands the parser the payload stored under one of its ``keys``. A parser returns
/// nil when the payload is not its format (another parser for the same key may take it) and
/// throws ``ParseError`` when it is its format but the bytes are wrong.
public protocol AdvertisementParser: Sendable {
    /// The format name reported with the readings, e.g. `bthome_v2`.
    var format: String { get }
    /// Where in an advertisement the format lives.
    var keys: [AdvertisementKey] { get }
    func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext) throws(ParseError)
        -> [Reading]?
    /// True for formats other devices piggy-back on (iBeacon): when an advertisement carries
    /// several payloads, generic formats are tried only after every specific one declined.
    var isGeneric: Bool { get }
    /// True for formats whose devices put a varying value where the company id belongs — Govee's
    /// H5055 sends a different "company id" per device, Inkbird IBS-TH and ThermoPro TP35x start
    /// their readings there: the registry offers such a parser every manufacturer-data payload
    /// that no parser registered for its company id claimed, with `.manufacturer(id)` as the key.
    /// The parser must recognise its frames by length, fixed bytes and name or service UUID.
    var acceptsAnyCompanyID: Bool { get }
}

extension AdvertisementParser {
    public var isGeneric: Bool { false }
    public var acceptsAnyCompanyID: Bool { false }
}

/// The outcome of decoding an advertisement: which format matched and what it said.
public struct DecodedAdvertisement: Sendable, Hashable {
    public var format: String
    public var readings: [Reading]

    public init(format: String, readings: [Reading]) {
        self.format = format
        self.readings = readings
    }
}
