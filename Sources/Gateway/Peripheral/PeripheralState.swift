import Bluetooth

/// What the gateway serves in the peripheral role: the latest value of every characteristic and
/// the advertisement as it stands (`peripheral` in config.json, docs/peripheral.md).
struct PeripheralState {
    var values: [PeripheralCharacteristicID: [UInt8]] = [:]
    var advertisement: PeripheralAdvertisement?
    /// Advertising data fed from MQTT so far (what ``advertisement`` carries).
    var advertisingData: [PeripheralDataID: [UInt8]] = [:]
    /// Newer MQTT-fed advertising data not advertised yet (the port is busy or was refused).
    var pendingAdvertisingData: [PeripheralDataID: [UInt8]]?
    /// The data the next advertisement should carry: the pending data, else the current.
    var wantedAdvertisingData: [PeripheralDataID: [UInt8]] { pendingAdvertisingData ?? advertisingData }
    /// Centrals subscribed per characteristic (for logs and `bridge/health`).
    var subscribers: [PeripheralCharacteristicID: Set<BluetoothAddress?>] = [:]
    var updates = 0
    var writes = 0
    var valueErrors = 0
    var advertisingErrors = 0

    /// The services of `settings` with their initial values.
    static func services(_ settings: PeripheralSettings) -> [PeripheralService] {
        settings.services.map { service in
            PeripheralService(
                uuid: service.uuid,
                characteristics: service.characteristics.map {
                    PeripheralCharacteristic(uuid: $0.uuid, properties: $0.properties, value: $0.initialValue)
                })
        }
    }

    /// The advertisement `settings` describe, with the latest MQTT-fed data in `data`; nil when
    /// advertising is off.
    static func advertisement(_ settings: PeripheralSettings, data: [PeripheralDataID: [UInt8]])
        -> PeripheralAdvertisement?
    {
        let advertising = settings.advertising
        guard advertising.enabled else { return nil }
        var content = AdvertisementData(
            localName: advertising.localName,
            serviceUUIDs: advertising.serviceUUIDs ?? settings.services.map(\.uuid))
        for (index, entry) in advertising.manufacturerData.enumerated() {
            content.manufacturerData[entry.companyID] = data[.manufacturer(index)] ?? entry.data.initialValue
        }
        for (index, entry) in advertising.serviceData.enumerated() {
            content.serviceData[entry.uuid] = data[.service(index)] ?? entry.data.initialValue
        }
        content.txPower = advertising.txPower.flatMap { Int8(exactly: $0) }
        return PeripheralAdvertisement(
            connectable: advertising.connectable, data: content,
            appearance: advertising.appearance.flatMap { UInt16(exactly: $0) }, solicitUUIDs: advertising.solicitUUIDs)
    }
}

/// An MQTT-fed piece of advertising data: its position in `manufacturer_data` or `service_data`.
enum PeripheralDataID: Hashable, Sendable, CustomStringConvertible {
    case manufacturer(Int)
    case service(Int)

    var description: String {
        switch self {
        case .manufacturer(let index): "manufacturer_data[\(index)]"
        case .service(let index): "service_data[\(index)]"
        }
    }
}
