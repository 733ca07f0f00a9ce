import Bluetooth
import Parsers
import Synchronization

/// A notification longer than the link allows, cut without a word: an ATT Handle Value
/// Notification carries at most MTU − 3 bytes of a value (opcode, handle), a Multiple Handle
/// Value Notification (Bluetooth 5.2; bluetoothd 5.66 as a server sends them to a client that
/// supports them, as bluetoothd does) at most MTU − 5 (opcode, handle, length), and the
/// peripheral's stack sends the first bytes of a longer value. Nothing in org.bluez says a value
/// was cut; what gattway can observe is the length: a notification of exactly MTU − 3 or
/// MTU − 5 bytes (the `MTU` property of `GattCharacteristic1`, or the MTU `AcquireNotify`
/// returned) that the configured parser rejects for being too short or of the wrong length (its
/// declared fields or fixed length need more) is that sign (docs/operations.md, "Notifications
/// cut at the MTU").
enum NotificationCut {
    /// Whether a notification of `length` bytes on a link of ATT MTU `mtu`, which the parser
    /// rejected with `error`, was cut by the MTU.
    static func isCut(length: Int, mtu: Int, error: ParseError) -> Bool {
        mtu >= 23 && (length == mtu - 3 || length == mtu - 5) && (error.kind == .tooShort || error.kind == .length)
    }

    /// The warning logged once per device and characteristic.
    static func warning(
        _ name: String, _ characteristic: BluetoothUUID, length: Int, mtu: Int, _ error: ParseError
    ) -> String {
        "\(name): notification of \(characteristic.shortDescription) cut to \(length) bytes by the link's ATT MTU of \(mtu) (a notification carries at most MTU − 3 = \(mtu - 3) bytes of a value, MTU − 5 = \(mtu - 5) in a Multiple Handle Value Notification): the value is longer than the link allows and its parser needs more (\(error)); counted as dropped.notification_cut, warned once per device and characteristic. Poll the characteristic instead (a read gets the whole value), or have the device negotiate a larger MTU"
    }
}

/// The ATT MTU of one link, as the connect job learnt it, read by its notification handlers
/// (on the loop thread) while the job may still set it.
final class LinkMTU: Sendable {
    private let raw: Atomic<Int>

    init(_ mtu: Int?) { raw = Atomic(mtu ?? 0) }

    /// Nil while unknown.
    var value: Int? {
        let mtu = raw.load(ordering: .relaxed)
        return mtu > 0 ? mtu : nil
    }

    func set(_ mtu: Int?) { raw.store(mtu ?? 0, ordering: .relaxed) }
}
