import Bluetooth

/// Oras Hydractiva Digital hand shower (Amphiro based), manufacturer 0xFAEE, 19 bytes,
/// big-endian: session number (uint24), session duration s (uint16), 3 bytes not decoded,
/// water used (uint24, / 2560 L), water temperature °C (uint8), heating energy (uint16,
/// × 0.01 kWh), 5 bytes not decoded. Layout: Theengs decoder `devices/Amphiro_json.h`.
public struct OrasHydractiva: AdvertisementParser {
    public init() {}
    public var format: String { "oras_hydractiva" }
    public var keys: [AdvertisementKey] { [.manufacturer(0xFAEE)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 19 else { return nil }
        var reader = ByteReader(payload, what: "Oras Hydractiva")
        let session = try reader.uintBE(3)
        let seconds = try reader.u16be()
        try reader.skip(3)
        let water = try reader.uintBE(3)
        let temperature = try reader.u8()
        let energy = try reader.u16be()
        return [
            Reading("session", Double(session)),
            Reading(.showerDuration, Double(seconds)),
            Reading(.showerWater, rounded(Double(water) / 2560, 3)),
            Reading(.temperature, Double(temperature)),
            Reading(.energy, decimal(energy, 2)),
        ]
    }
}
