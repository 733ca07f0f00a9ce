import Bluetooth

/// Otodata propane tank monitor (Rotarex-compatible RC1010 family), manufacturer 0x03B1; every
/// frame starts with ASCII `OTO`. 19-byte `OTOTELE` frame: 2 bytes, tank level uint16 LE ×
/// 0.01 %, status uint16 LE, rest not decoded. 22-byte `OTO3…` identification frame: serial
/// number uint32 LE at byte 7, model type uint32 LE at byte 18. Other `OTO` frames are not
/// decoded (`unsupported`). Layout: Theengs decoder `devices/OTOD_json.h`.
public struct OtodataTankMonitor: AdvertisementParser {
    public init() {}
    public var format: String { "otodata" }
    public var keys: [AdvertisementKey] { [.manufacturer(0x03B1)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.starts(with: [0x4F, 0x54, 0x4F]) else { return nil }
        switch payload.count {
        case 19:
            var reader = ByteReader(payload, from: 9, what: "Otodata level frame")
            let level = try reader.u16le()
            let status = try reader.u16le()
            return [Reading(.tankLevel, decimal(level, 2)), Reading("status", Double(status))]
        case 22:
            var reader = ByteReader(payload, from: 7, what: "Otodata identification frame")
            let serial = try reader.u32le()
            try reader.skip(7)
            let model = try reader.u32le()
            return [Reading("serial", Double(serial)), Reading("model_type", Double(model))]
        default:
            throw ParseError(.unsupported, "Otodata frame of \(payload.count) bytes")
        }
    }
}
