import Bluetooth

/// The Battery Level characteristic's value (Bluetooth SIG Battery Service 0x180F, one uint8 %)
/// sent as service data of 0x180F (Theengs `ServiceData_json.h`).
public struct BatteryServiceData: AdvertisementParser {
    public init() {}
    public var format: String { "battery_service_data" }
    public var keys: [AdvertisementKey] { [.serviceData(0x180F)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 1 else {
            throw ParseError.length("Battery service data", expected: 1, got: payload.count)
        }
        var reader = ByteReader(payload, what: "Battery service data")
        let level = try reader.u8()
        guard level <= 100 else { throw ParseError(.prohibitedValue, "battery level \(level) > 100") }
        return [Reading(.battery, Double(level))]
    }
}
