import Bluetooth

/// What the gateway needs from a Bluetooth LE peripheral (the `peripheral` role, docs/peripheral.md),
/// in the shape BlueZ's `PeripheralManager` offers it.
///
/// Contract for an implementation:
/// - ``serve(_:)`` publishes the GATT services (registering them with the stack) and returns
///   when they are served or throws ``BLEPortError``. Characteristics are named by
///   ``PeripheralCharacteristicID`` — their positions in the list given to ``serve(_:)``.
/// - Reads by centrals are answered by the port with the value last given to
///   ``setValue(_:for:)`` (initially ``PeripheralCharacteristic/value``); the gateway is not asked.
/// - ``setValue(_:for:)`` also notifies (or indicates) every subscribed central.
/// - ``advertise(_:)`` starts advertising, or replaces what is advertised; nil stops.
/// - Writes by centrals are accepted by the port (Write Requests answered with success) and
///   handed to the closure given to ``events(_:)`` in order, as are subscriptions (on the
///   gateway's loop thread or any other, as for ``BLEPort``).
/// - The async methods are called from the gateway's jobs and must honour task cancellation.
/// - After the stack restarts (bluetoothd, adapter power) the port serves and advertises again
///   by itself, with the latest values.
public protocol PeripheralPort: Sendable {
    /// Serves `services` until the port ends.
    func serve(_ services: [PeripheralService]) async throws(BLEPortError)

    /// The new value of a served characteristic; subscribed centrals are notified.
    func setValue(_ value: [UInt8], for characteristic: PeripheralCharacteristicID) async

    /// Advertises `advertisement` (replacing the previous one); nil stops advertising.
    func advertise(_ advertisement: PeripheralAdvertisement?) async throws(BLEPortError)

    /// Hands writes and subscription changes by centrals to `deliver`, for as long as the port lives.
    func events(_ deliver: @escaping @Sendable (PeripheralPortEvent) -> Void)
}

/// A served characteristic: its service's position and its own position in that service.
public struct PeripheralCharacteristicID: Sendable, Hashable, CustomStringConvertible {
    public var service: Int
    public var characteristic: Int

    public init(service: Int, characteristic: Int) {
        self.service = service
        self.characteristic = characteristic
    }

    public var description: String { "services[\(service)].characteristics[\(characteristic)]" }
}

/// A primary service to serve.
public struct PeripheralService: Sendable, Hashable {
    public var uuid: BluetoothUUID
    public var characteristics: [PeripheralCharacteristic]

    public init(uuid: BluetoothUUID, characteristics: [PeripheralCharacteristic]) {
        self.uuid = uuid
        self.characteristics = characteristics
    }
}

/// A characteristic to serve, with its value before the first ``PeripheralPort/setValue(_:for:)``.
public struct PeripheralCharacteristic: Sendable, Hashable {
    public var uuid: BluetoothUUID
    public var properties: CharacteristicProperties
    public var value: [UInt8]

    public init(uuid: BluetoothUUID, properties: CharacteristicProperties, value: [UInt8] = []) {
        self.uuid = uuid
        self.properties = properties
        self.value = value
    }
}

/// What to advertise.
public struct PeripheralAdvertisement: Sendable, Hashable {
    /// Connectable (LE advertisement type "peripheral") or broadcast only.
    public var connectable: Bool
    public var data: AdvertisementData
    /// GAP appearance.
    public var appearance: UInt16?
    /// Services the gateway asks a central to offer (solicited service UUIDs).
    public var solicitUUIDs: [BluetoothUUID]

    public init(
        connectable: Bool = true, data: AdvertisementData, appearance: UInt16? = nil, solicitUUIDs: [BluetoothUUID] = []
    ) {
        self.connectable = connectable
        self.data = data
        self.appearance = appearance
        self.solicitUUIDs = solicitUUIDs
    }
}

/// Something a central did to a served characteristic.
public enum PeripheralPortEvent: Sendable, Hashable {
    /// A central wrote `value` (BlueZ 5.66 does not say whether as a Write Request or Command).
    case write(PeripheralCharacteristicID, value: [UInt8], central: BluetoothAddress?)
    /// A central enabled notifications or indications.
    case subscribed(PeripheralCharacteristicID, central: BluetoothAddress?)
    /// A central disabled them (or disconnected).
    case unsubscribed(PeripheralCharacteristicID, central: BluetoothAddress?)
}
