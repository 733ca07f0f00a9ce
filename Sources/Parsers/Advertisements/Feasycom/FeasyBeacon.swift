import Bluetooth

/// Feasycom beacons, service data 0xFFF0, 11 bytes: model code (0x15 BP102, 0x19 BP109, 0x1A
/// BP103, 0x1B BP104, 0x1C BP201, 0x1D BP106, 0x1E BP101, 0x24 BP120, 0x27 BP108, 0x28 BP108N,
/// 0x29 BP103B), 3 bytes not decoded, MAC (6, written order), battery % (bits 0–6; 0x65 = on
/// external power, no battery reading). Recognised by length and a known model code, since
/// 0xFFF0 is used by many devices. Layout: Theengs decoder `devices/FEASY_json.h`.
public struct FeasyBeacon: AdvertisementParser {
    public init() {}
    public var format: String { "feasy_beacon" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFFF0)] }

    static let models: [UInt8: String] = [
        0x15: "BP102", 0x19: "BP109", 0x1A: "BP103", 0x1B: "BP104", 0x1C: "BP201", 0x1D: "BP106", 0x1E: "BP101",
        0x24: "BP120", 0x27: "BP108", 0x28: "BP108N", 0x29: "BP103B",
    ]

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 11, let code = payload.first, let model = Self.models[code] else { return nil }
        var reader = ByteReader(payload, from: 4, what: "Feasycom beacon")
        let mac = try reader.address()
        let battery = try reader.u8()
        var readings = [Reading("beacon_model", string: model), Reading("mac", string: mac.description)]
        let pluggedIn = battery == 0x65
        if !pluggedIn { readings.append(Reading(.battery, Double(battery & 0x7F))) }
        readings.append(Reading("plugged_in", bool: pluggedIn, deviceClass: .plug))
        return readings
    }
}
