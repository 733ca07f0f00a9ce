import Bluetooth
import DBus

/// The `org.bluez.Error.*` replies bluetoothd 5.66 sends (`src/error.c`), with its default
/// messages, and the ATT-error mapping of the GATT client (`create_gatt_dbus_error`).
public enum BlueZError {
    static func name(_ short: String) -> DBusError.Name { DBusError.Name("org.bluez.Error." + short) }

    /// `InvalidArguments` "Invalid arguments in method call".
    public static let invalidArguments = DBusError(name("InvalidArguments"), "Invalid arguments in method call")
    /// `InProgress` "Operation already in progress" (`btd_error_busy`).
    public static let busy = DBusError(name("InProgress"), "Operation already in progress")
    /// `InProgress` "In Progress" (`btd_error_in_progress`).
    public static let inProgress = DBusError(name("InProgress"), "In Progress")
    /// `NotReady` "Resource Not Ready".
    public static let notReady = DBusError(name("NotReady"), "Resource Not Ready")
    /// `DoesNotExist` "Does Not Exist".
    public static let doesNotExist = DBusError(name("DoesNotExist"), "Does Not Exist")
    /// `AlreadyExists` "Already Exists".
    public static let alreadyExists = DBusError(name("AlreadyExists"), "Already Exists")
    /// `NotSupported` "Operation is not supported".
    public static let notSupported = DBusError(name("NotSupported"), "Operation is not supported")
    /// `NotConnected` "Not Connected".
    public static let notConnected = DBusError(name("NotConnected"), "Not Connected")
    /// `NotAuthorized` "Operation Not Authorized".
    public static let notAuthorized = DBusError(name("NotAuthorized"), "Operation Not Authorized")

    /// `AuthenticationFailed` "Authentication Failed": pairing failed (e.g. the peer's SMP
    /// Pairing Failed; `new_authentication_return` in device.c).
    public static let authenticationFailed = DBusError(name("AuthenticationFailed"), "Authentication Failed")
    /// `AuthenticationCanceled` "Authentication Canceled": pairing cancelled, or the link dropped.
    public static let authenticationCanceled = DBusError(name("AuthenticationCanceled"), "Authentication Canceled")
    /// `ConnectionAttemptFailed` "Page Timeout": the connection for pairing could not be made.
    public static let connectionAttemptFailed = DBusError(name("ConnectionAttemptFailed"), "Page Timeout")

    /// `Failed` with a custom text, e.g. "le-connection-abort-by-local".
    public static func failed(_ message: String) -> DBusError { DBusError(name("Failed"), message) }
    /// `NotPermitted` with a custom text, e.g. "Write acquired".
    public static func notPermitted(_ message: String) -> DBusError { DBusError(name("NotPermitted"), message) }

    /// The error reply for what a handler threw: a ``DBusError`` as it is, anything else `Failed`
    /// with its description.
    public static func reply(for error: any Error) -> DBusError {
        error as? DBusError ?? failed("\(error)")
    }

    /// The reply for an ATT error response from the peer (docs/bluez.md §2.2).
    public static func att(_ code: UInt8) -> DBusError {
        switch code {
        case 0: failed("Operation failed")
        case 0x02: notPermitted("Read not permitted")
        case 0x03: notPermitted("Write not permitted")
        case 0x05, 0x0C, 0x0F: notPermitted("Not paired")
        case 0x07: DBusError(name("InvalidArguments"), "Invalid offset")
        case 0x0D: DBusError(name("InvalidArguments"), "Invalid Length")
        case 0x08: notAuthorized
        case 0x06: notSupported
        default: failed("Operation failed with ATT error: 0x" + Hex.encode([code]))
        }
    }
}
