import Bluetooth

/// iNode Energy Meter (electricity, gas or water pulse counter). Its manufacturer id is the
/// frame type: 0x8290, 0x8292, 0x8294 or 0x8296, bit 2 of the id = low battery. 11 bytes,
/// little-endian: average pulses per minute (uint16), total pulses (uint32), constant (uint16:
/// bits 0–13 = pulses per kWh or per m³; bit 12 set = the meter counts m³ — Theengs keeps that
/// bit in the constant too, and so do we), battery/light byte (high nibble: 1 = 100 %, 2…11 =
/// (n − 1) × 10 %), two more bytes not decoded. Electricity publishes `power` (kW = average ×
/// 60 / constant) and `energy` (kWh = total / constant); water/gas publishes
/// `volume_flow_rate` (m³/h) and `water` (m³). Layout: Theengs decoder `devices/iNodeEM_json.h`.
public struct INodeEnergyMeter: AdvertisementParser {
    public init() {}
    public var format: String { "inode_energy_meter" }
    public var keys: [AdvertisementKey] {
        [.manufacturer(0x8290), .manufacturer(0x8292), .manufacturer(0x8294), .manufacturer(0x8296)]
    }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard case .manufacturer(let company) = key else { return nil }
        guard payload.count == 11 else { throw .length("iNode Energy Meter", expected: 11, got: payload.count) }
        var reader = ByteReader(payload, what: "iNode Energy Meter")
        let average = Double(try reader.u16le())
        let total = Double(try reader.u32le())
        let constantField = try reader.u16le()
        let batteryNibble = Int(try reader.u8() >> 4)
        let constant = Double(constantField & 0x3FFF)
        let cubicMetres = constantField & 0x1000 != 0
        var readings = [Reading].reserved()
        if constant > 0 {
            let rate = rounded(average * 60 / constant, 6)
            let sum = rounded(total / constant, 6)
            if cubicMetres {
                readings.append(Reading(.iNodeFlowRate, rate))
                readings.append(Reading(.iNodeWater, sum))
            } else {
                readings.append(Reading(.iNodePower, rate))
                readings.append(Reading(.energy, sum))
            }
        }
        let battery: Double? =
            switch batteryNibble {
            case 1, 11...15: 100
            case 2...10: Double((batteryNibble - 1) * 10)
            default: nil
            }
        readings.append(Reading(.battery, battery))
        readings.append(Reading("battery_low", bool: company & 0x0004 != 0, deviceClass: .battery))
        return readings
    }
}
