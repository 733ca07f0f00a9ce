import Bluetooth

/// Sensor Easy sensors (SE TEMP, SE RHT, SE TEMP PROBE, SE MAG), told apart by the local name
/// (`C T …`/`P T EN …`, `P RHT …`, `P TPROBE …`, `P MAG …`). They advertise a SIG
/// characteristic value as service data: 0x2A6E temperature int16 LE × 0.01 °C (0x7FFF = no
/// value), 0x2A6F humidity as one byte in % (not the SIG uint16), 0x2A06 for the magnet
/// contact (bit 0 of the first byte clear = open). Manufacturer data 0x0757 `F2` + uint16 LE is
/// the battery in mV. Layout: Theengs decoder `devices/SE_TEMP_json.h`, `SE_RHT_json.h`,
/// `SE_TPROBE_json.h`, `SE_MAG_json.h`.
public struct SensorEasy: AdvertisementParser {
    public init() {}
    public var format: String { "sensor_easy" }
    public var keys: [AdvertisementKey] {
        [.serviceData(0x2A6E), .serviceData(0x2A6F), .serviceData(0x2A06), .manufacturer(0x0757)]
    }

    enum Model { case temperature, humidity, probe, magnet }

    /// The model from the local name, which starts `C ` or `P ` and then names the model.
    static func model(_ name: String?) -> Model? {
        guard let name, name.hasPrefix("C ") || name.hasPrefix("P ") else { return nil }
        let rest = name.dropFirst(2)
        if rest.hasPrefix("T ") { return .temperature }
        if rest.hasPrefix("RHT ") { return .humidity }
        if rest.hasPrefix("TPROBE") { return .probe }
        if rest.hasPrefix("MAG") { return .magnet }
        return nil
    }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard let model = Self.model(context.advertisement.localName) else { return nil }
        var readings = [Reading].reserved()
        switch key {
        case .serviceData(0x2A6E):
            guard model != .magnet else { return nil }
            guard payload.count == 2 else { throw .length("Sensor Easy temperature", expected: 2, got: payload.count) }
            var reader = ByteReader(payload, what: "Sensor Easy temperature")
            let raw = try reader.s16le()
            if raw != 0x7FFF { readings.append(Reading(.temperature, decimal(raw, 2))) }
        case .serviceData(0x2A6F):
            guard model == .humidity else { return nil }
            guard payload.count == 1 else { throw .length("Sensor Easy humidity", expected: 1, got: payload.count) }
            readings.append(Reading(.humidity, Double(payload[0])))
        case .serviceData(0x2A06):
            guard model == .magnet else { return nil }
            guard payload.count == 2 else { throw .length("Sensor Easy contact", expected: 2, got: payload.count) }
            readings.append(Reading("window", bool: payload[0] & 0x01 == 0, deviceClass: .opening))
        case .manufacturer:
            break
        default:
            return nil
        }
        if let battery = context.advertisement.manufacturerData[0x0757], battery.count == 3, battery[0] == 0xF2 {
            var reader = ByteReader(battery, from: 1, what: "Sensor Easy battery")
            readings.append(Reading(.voltage, decimal(try reader.u16le(), 3)))
        } else if case .manufacturer = key {
            return nil
        }
        return readings
    }
}
