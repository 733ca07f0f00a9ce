import Bluetooth

/// What a job of the core reports back (``CoreEvent/completed(_:)``).
enum JobCompletion: Sendable {
    /// A connect job: the link is up with these characteristics and subscriptions, or failed.
    case connect(BluetoothAddress, Result<EstablishedLink, BLEPortError>)
    /// A command, `/get`, poll or raw GATT job of the device ended.
    case gatt(BluetoothAddress, GATTOutcome)
    /// The peripheral port took a characteristic's value.
    case servedValue(PeripheralCharacteristicID, sent: [UInt8])
    /// The peripheral port took (or refused) an advertisement.
    case advertised(AdvertisedData, error: BLEPortError?)
    /// A job that reports nothing (a disconnect).
    case done
    /// A job of the ``GatewayAttachment``: what it returned, handed to it.
    case attachment(any Sendable)
}
