import Bluetooth

/// The parsers shipped with gattway, in the order the registry tries them for a shared key.
/// Adding a built-in parser means adding it here (plugins call ``ParserRegistry/register(_:)-…``).
enum BuiltInParsers {
    static let characteristics: [any CharacteristicParser] = [
        BatteryLevel(), Temperature(), Humidity(), Pressure(), Illuminance(), Elevation(), ManufacturerName(),
        DeviceName(), HeartRateMeasurement(), TemperatureMeasurement(), WeightMeasurement(), CSCMeasurement(),
        BatteryLevelStatus(), BatteryLevelState(), BloodPressureMeasurement(),
    ]

    /// Registered in this order; for one key, later entries are tried first.
    static let advertisements: [any AdvertisementParser] = [
        BTHomeV2(), BTHomeV1(), MiBeacon(), RuuviRAWv1(), RuuviRAWv2(), ATC1441(), PVVXCustom(), IBeacon(),
        EddystoneUID(), EddystoneURL(), EddystoneTLM(), EddystoneEID(), KKMSensorFrame(), GoveeH5075(), GoveeH5074(),
        GoveeH5101(), GoveeH5179(),
        MiScaleV1(), MiScaleV2(), HuamiActivity(), AppleWatchNearby(), HHCCJCY10(), AirPodsProximity(),
    ]
}
