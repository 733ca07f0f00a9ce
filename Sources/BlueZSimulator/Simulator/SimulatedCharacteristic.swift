import Bluetooth
import DBus
import EventLoop

/// One remote characteristic: the peer's value, notification sources, and BlueZ's per-client
/// notify sessions and acquired sockets. Owned by ``BlueZSimulator``; loop thread only.
/// Invariant behind `@unchecked Sendable`: confined to the loop thread — only the
/// ``BlueZSimulator`` actor (whose executor is that loop) and the timer and watch handlers it
/// registers on the same loop touch it; it is captured by those closures, never used elsewhere.
final class SimulatedCharacteristic: @unchecked Sendable {
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
    let descriptors: [(uuid: BluetoothUUID, path: DBusObjectPath, handle: UInt16, value: [UInt8])]

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
