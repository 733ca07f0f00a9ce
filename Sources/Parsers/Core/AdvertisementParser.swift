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
    /// The frame counter of a payload this parser just decoded into `readings`: the number the
    /// format gives each new frame and repeats in every retransmission of it — BTHome's packet
    /// id (else, encrypted, its encryption counter), MiBeacon's frame counter, the ATC/pvvx and
    /// Qingping counter, Ruuvi's measurement sequence. Nil (the default) when the format has
    /// none or this frame does not carry it; the frame is then known by its bytes
    /// (``DecodedAdvertisement/frame``). For an encrypted format, the counter of the frame that
    /// decrypted.
    func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32?
}

extension AdvertisementParser {
    public var isGeneric: Bool { false }
    public var acceptsAnyCompanyID: Bool { false }
    public func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32? { nil }
}

extension [Reading] {
    /// The value of the reading `name` as a frame counter (``AdvertisementParser/frameCounter(_:readings:)``
    /// of formats that publish their counter): nil when absent, null or not a whole number in 0…2³²−1.
    public func frameCounter(named name: String) -> UInt32? {
        guard let value = first(where: { $0.name == name })?.value.number else { return nil }
        return UInt32(exactly: value)
    }
}

/// The outcome of decoding an advertisement: which format matched and what it said.
public struct DecodedAdvertisement: Sendable, Hashable {
    public var format: String
    public var readings: [Reading]
    /// The identity of the frame, the same in every retransmission of it and different for a new
    /// one: its counter (``AdvertisementParser/frameCounter(_:readings:)``) with where in the
    /// advertisement the payload was, else a hash of that place and the payload's bytes (the
    /// ciphertext, for an encrypted frame without a counter). The gateway publishes a frame once
    /// (docs/config.md, `publish_repeats`).
    public var frame: UInt64

    public init(format: String, readings: [Reading], frame: UInt64 = 0) {
        self.format = format
        self.readings = readings
        self.frame = frame
    }

    /// The ``frame`` of a payload under `key` with this counter, or without one (FNV-1a of the
    /// key and the bytes, 63 bits; a counter sets the top bit, so the two never meet).
    static func frame(counter: UInt32?, key: AdvertisementKey, payload: [UInt8]) -> UInt64 {
        let code = key.code
        if let counter { return 1 << 63 | UInt64(code) << 32 | UInt64(counter) }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        hash = (hash ^ UInt64(code)) &* 0x0000_0100_0000_01b3
        for byte in payload { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return hash & ~(1 << 63)
    }
}
