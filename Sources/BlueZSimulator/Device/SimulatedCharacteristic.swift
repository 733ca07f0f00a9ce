import Bluetooth
import DBus
import EventLoop

/// One remote characteristic: the peer's value, notification sources, and BlueZ's per-client
/// notify sessions and acquired sockets; its GATT procedures are in
/// SimulatedCharacteristic+GATT.swift. Not Sendable: owned by its ``SimulatedDevice`` and, like
/// it, touched only in the ``BlueZSimulator`` actor's isolation.
final class SimulatedCharacteristic {
    /// One end of an AcquireNotify/AcquireWrite socket pair kept by the simulator.
    struct Acquired {
        var fd: Int32
        var watch: EventLoop.Token
        var owner: String
    }

    let spec: CharacteristicSpec
    let uuid: BluetoothUUID
    let handle: UInt16
    let path: DBusObjectPath
    let servicePath: DBusObjectPath
    let serviceUUID: BluetoothUUID
    /// A descriptor of the remote database (the CCCD's value is the subscription's).
    typealias Descriptor = (uuid: BluetoothUUID, path: DBusObjectPath, handle: UInt16, value: [UInt8])

    let descriptors: [Descriptor]

    /// What a read returns now (the peer's attribute value).
    var peerValue: [UInt8]
    /// A generated initial value gives a new value on every read.
    var readSource: PayloadGenerator?
    var notifySource: PayloadGenerator?
    /// D-Bus unique names with a StartNotify session.
    var notifySessions: [String] = []
    var notifyTimer: EventLoop.Token?
    var acquiredNotify: Acquired?
    var acquiredWrite: Acquired?
    var pendingRead: (offset: UInt16, replies: [DBusPendingReply])?
    var writePending = false
    /// On a linked adapter's device: the application characteristic that answers, and the device.
    var target: ApplicationObject?
    var mirrorDevice: DBusObjectPath?

    init(
        layout: GATTLayout.Characteristic, servicePath: DBusObjectPath, serviceUUID: BluetoothUUID, seed: UInt64,
        address: BluetoothAddress
    ) throws {
        spec = layout.spec
        uuid = layout.spec.uuid
        handle = layout.handle
        self.servicePath = servicePath
        self.serviceUUID = serviceUUID
        path = try servicePath.appending(GATTLayout.element("char", layout.handle))
        let ownPath = path
        descriptors = try layout.descriptors.map { descriptor in
            (
                descriptor.uuid, try ownPath.appending(GATTLayout.element("desc", descriptor.handle)),
                descriptor.handle, descriptor.value
            )
        }
        var source = PayloadGenerator(layout.spec.value, seed: seed, address: address)
        peerValue = source.next()
        if case .bytes = layout.spec.value {} else { readSource = source }
        if let notify = layout.spec.notifyValue {
            notifySource = PayloadGenerator(notify, seed: seed &+ 7, address: address)
        } else if let readSource {
            notifySource = readSource
        }
    }

    func has(_ flag: String) -> Bool { spec.flags.contains(flag) }

    var canNotify: Bool { has("notify") || has("indicate") }

    /// Someone receives notifications (a StartNotify session or an acquired socket).
    var isSubscribed: Bool { !notifySessions.isEmpty || acquiredNotify != nil }

    /// The value of the next notification (advances generators; without one, the peer's value).
    func nextNotificationValue() -> [UInt8] {
        if var source = notifySource {
            peerValue = source.next()
            notifySource = source
        }
        return peerValue
    }
}
