import Bluetooth

/// Govee H5121 motion, H5122 / H5125 / H5126 buttons, H5123 door/window, H5124 vibration and
/// H5130 pressure/presence sensors (govee-ble), manufacturer id 0xEF88, 24 bytes:
/// two bytes, a 4-byte time value, 16 encrypted bytes, CRC-16 BE of the encrypted bytes
/// (CCITT polynomial 0x1021, initial 0x1D0F).
///
/// The block is AES-128-ECB with a key every frame carries: the 4 time bytes followed by 12 zero
/// bytes, key, ciphertext and plaintext each byte-reversed (a fixed public scheme, not a
/// per-device secret). Plaintext: `01`, a byte, model (`03` H5121, `08` H5122, `02` H5123,
/// `09` H5124, `0A` H5125, `0B` H5126, `0D` H5130), a byte, battery %, event value. Events:
/// `motion`/`vibration` (value 1), `button_N` = `press` (N = value), `window` open when 2;
/// H5130 a bit field: `presence` bit 0 (not reported for a bare button frame `10`), `button_0`
/// = `press` bit 4.
public struct GoveeH512x: AdvertisementParser {
    public init() {}
    public var format: String { "govee_h512x" }
    public var keys: [AdvertisementKey] { [.manufacturer(0xEF88)] }

    enum Model { case motion, button, window, vibration, pressure }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 24 else { return nil }
        var reader = ByteReader(payload, from: 2, what: "Govee H512x")
        let time = try reader.bytes(4)
        let encrypted = try reader.bytes(16)
        let crc = try reader.u16be()
        guard Self.crc16(encrypted) == crc else { return nil }
        let key = Array((time + [UInt8](repeating: 0, count: 12)).reversed())
        guard let reversed = AESECB.decrypt(key: key, ciphertext: encrypted.reversed()) else {
            throw ParseError(.decryptionFailed, "Govee H512x: AES-ECB failed")
        }
        let plain = Array(reversed.reversed())
        var fields = ByteReader(plain, from: 2, what: "Govee H512x plaintext")
        let modelID = try fields.u8()
        try fields.skip(1)
        let battery = try fields.u8()
        let value = try fields.u8()
        guard let model = Self.model(modelID, context) else {
            throw ParseError(.unsupported, "Govee H512x model byte 0x\(Hex.encode([modelID]))")
        }
        var readings = [Reading(.battery, Double(battery))]
        switch model {
        case .window:
            readings.append(Reading("window", bool: value == 2, deviceClass: .window))
        case .vibration:
            if value == 1 { readings.append(Reading("vibration", string: "vibration")) }
        case .motion:
            if value == 1 { readings.append(Reading("motion", string: "motion")) }
        case .pressure:
            // A bit field: 0x01 pressure applied (presence), 0x10 the button; 0x11 both.
            if value & 0x10 != 0 { readings.append(Reading("button_0", string: "press")) }
            if value != 0x10 {
                readings.append(
                    Reading("presence", bool: value & 0x01 != 0, deviceClass: .presence))
            }
        case .button:
            readings.append(Reading("button_\(value)", string: "press"))
        }
        return readings
    }

    /// The model, by name first (as govee-ble does), then by the decrypted model byte.
    static func model(_ id: UInt8, _ context: AdvertisementContext) -> Model? {
        if context.nameContains("GV5121") || id == 0x03 { return .motion }
        if context.nameContains("GV5122") || id == 0x08 { return .button }
        if context.nameContains("GV5123") || id == 0x02 { return .window }
        if context.nameContains("GV5124") || id == 0x09 { return .vibration }
        if context.nameContains("GV5125") || id == 0x0A { return .button }
        if context.nameContains("GV5126") || id == 0x0B { return .button }
        if context.nameContains("GV5130") || id == 0x0D { return .pressure }
        return nil
    }

    /// CRC-16/CCITT with initial value 0x1D0F, MSB first.
    static func crc16(_ bytes: [UInt8]) -> UInt16 {
        var crc: UInt16 = 0x1D0F
        for byte in bytes { crc = (crc << 8) ^ crcTable[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)] }
        return crc
    }

    /// CRC-16/CCITT (polynomial 0x1021, most significant bit first) of every byte value, so the
    /// check is one look-up per byte instead of eight shifts.
    private static let crcTable: [UInt16] = (0..<256).map { (value: Int) -> UInt16 in
        var crc = UInt16(truncatingIfNeeded: value) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }
}
