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
    /// A `bridge/request/device/pair` or `…/unpair` ended (nil: it worked).
    case pairing(BluetoothAddress, unpair: Bool, BLEPortError?)
    /// The radio view's unfiltered scan started (nil: it could not; ``Gateway/demandRadioView()``).
    case radioScan(PortRegistration?)
    /// A job that reports nothing (a disconnect).
    case done
    /// A job of the ``GatewayAttachment``: what it returned, handed to it.
    case attachment(AttachmentOutcome)
}

/// What a job of the ``GatewayAttachment`` returned, in a box. A class reference keeps
/// ``JobCompletion`` — and so every ``CoreEvent`` — a loadable value: an `any Sendable` payload
/// made the enum address-only, copied three times on the way through the core's `handle`, some
/// 900 instructions per advertisement (scripts/callgrind-per-report.py).
final class AttachmentOutcome: Sendable {
    let value: any Sendable

    init(_ value: any Sendable) { self.value = value }
}
