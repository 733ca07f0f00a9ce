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
        RuuviFormat6(), RuuviE1(),
        // Vendor formats, one line per vendor group.
        SensorEasy(),
        INodeEnergyMeter(),
        SmartDryLaundry(),
        HoboMX2001(),
        NodOnNIU(),
        TempoDisc(),
        OriaThermometer(),
        MokoBeacon(), MokoBeaconXPro(),
        BParasite(),
        OrasHydractiva(), OrasFaucet(),
        Skale(),
        OtodataTankMonitor(),
        PolarH10(),
        Aranet4(),
        FeasyBeacon(),
        BeeWiDoorSensor(),
        XossX2(),
        JaaleeBeacon(),
        RDL52832(),
        ABTemp(),
        TiltHydrometer(),
        GoveeH5178(), GoveeH5112(), GoveeH5140(), GoveeH5127(), GoveeH512x(), GoveeMeatThermometer(), GoveeH5055(),
        LeagendBM2(), LeagendBM6(), TPMSSensor(), ThermoBeacon(), ExposureNotification(), BatteryServiceData(),
        OralBToothbrush(),
        MopekaPro(),
        SwitchBotServiceData(), SwitchBotMeter(),
        Qingping(),
        SensirionGadget(),
        ThermoProTP35x(),
        InkbirdIBSTH(), InkbirdIBBQ(),
        MiScaleV1(), MiScaleV2(), HuamiActivity(), AppleWatchNearby(), HHCCJCY10(), AirPodsProximity(),
        ATC1441Encrypted(), PVVXEncrypted(),
    ]
}
