import Bluetooth

/// Eddystone-TLM frame (google/eddystone `eddystone-tlm`), service data 0xFEAA, frame type
/// 0x20, big-endian. Version 0: battery mV (0 = not supported), temperature 8.8 fixed point
/// °C (0x8000 = not supported), advertising PDU count, uptime in 0.1 s. Version 1 (encrypted
/// eTLM) is reported with its raw fields only.
public struct EddystoneTLM: AdvertisementParser {
    public init() {}
    public var format: String { "eddystone_tlm" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFEAA)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.first == 0x20 else { return nil }
        var reader = ByteReader(payload, from: 1, what: "Eddystone-TLM")
        let version = try reader.u8()
        if version == 1 {
            let data = try reader.bytes(12)
            let salt = try reader.u16be()
            let mic = try reader.u16be()
            return [
                Reading("version", 1), Reading("encrypted_data", string: Hex.encode(data)),
                Reading("salt", Double(salt)), Reading("mic", Double(mic)),
            ]
        }
        guard version == 0 else { throw ParseError(.unsupported, "Eddystone-TLM version \(version) is unknown") }
        let millivolts = try reader.u16be()
        let temperature = try reader.s16be()
        let count = try reader.u32be()
        let uptime = try reader.u32be()
        return [
            Reading("version", 0),
            Reading(.voltage, millivolts == 0 ? nil : decimal(millivolts, 3)),
            Reading(.temperature, temperature == Int16.min ? nil : Double(temperature) / 256),
            Reading("advertising_count", Double(count)),
            Reading(name: "uptime", value: .number(decimal(uptime, 1)), unit: .seconds, deviceClass: .duration),
        ]
    }
}
