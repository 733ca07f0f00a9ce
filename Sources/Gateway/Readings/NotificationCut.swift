import Bluetooth
import Parsers

/// A notification longer than the link allows, cut without a word: an ATT notification carries
/// at most MTU − 3 bytes of a value, and the peripheral's stack (bluetoothd as a server does
/// too) sends the first MTU − 3 bytes of a longer value. Nothing in org.bluez says a value was
/// cut; what gattway can observe is the length: a notification of exactly MTU − 3 bytes (the
/// `MTU` property of `GattCharacteristic1`, or the MTU `AcquireNotify` returned) that the
/// configured parser rejects for being too short or of the wrong length (its declared fields or
/// fixed length need more) is that sign (docs/operations.md, "Notifications cut at the MTU").
enum NotificationCut {
    /// Whether a notification of `length` bytes on a link of ATT MTU `mtu`, which the parser
    /// rejected with `error`, was cut by the MTU.
    static func isCut(length: Int, mtu: Int, error: ParseError) -> Bool {
        mtu >= 23 && length == mtu - 3 && (error.kind == .tooShort || error.kind == .length)
    }

    /// The warning logged once per device and characteristic.
    static func warning(
        _ name: String, _ characteristic: BluetoothUUID, length: Int, mtu: Int, _ error: ParseError
    ) -> String {
        "\(name): notification of \(characteristic.shortDescription) cut to \(length) bytes (the link's ATT MTU is \(mtu), a notification carries at most MTU − 3 = \(mtu - 3)): the value is longer than the link allows and its parser needs more (\(error)); counted as dropped.notification_cut, warned once per device and characteristic. Poll the characteristic instead (a read gets the whole value), or have the device negotiate a larger MTU"
    }
}
