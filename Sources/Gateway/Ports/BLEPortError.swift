/// A failed BLE operation, classified the way the central's errors are (Core Bluetooth's meanings, docs/architecture.md), with the
/// underlying message (e.g. the BlueZ error name and text).
public struct BLEPortError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure; the gateway's retry and response logic depends on it.
    public enum Kind: String, Sendable, Hashable {
        /// Connecting (or an operation) did not complete in time.
        case connectionTimeout = "connection_timeout"
        /// The link dropped.
        case peripheralDisconnected = "peripheral_disconnected"
        /// The device or adapter cannot do this; retrying would not help.
        case operationNotSupported = "operation_not_supported"
        /// The device refused (ATT permission errors).
        case notPermitted = "not_permitted"
        /// The value has a length the characteristic does not accept.
        case invalidValueLength = "invalid_value_length"
        /// The device is not connected.
        case notConnected = "not_connected"
        /// The characteristic is not on the device.
        case notFound = "not_found"
        /// The adapter or bluetoothd is not available.
        case unavailable
        /// What the configuration asks for cannot be done at all (an advertisement over the
        /// 31-byte legacy limit, a service BlueZ refuses); retrying would not help.
        case invalidConfiguration = "invalid_configuration"
        /// Anything else.
        case other
    }

    public var kind: Kind
    public var message: String
    /// The ATT error code the device answered with, when the failure was an ATT error response
    /// (0x80…0x9F for a device's own application errors); in a command's response as
    /// `att_error`.
    public var attError: UInt8?

    public init(_ kind: Kind, _ message: String, attError: UInt8? = nil) {
        self.kind = kind
        self.message = message
        self.attError = attError
    }

    public var description: String { message.isEmpty ? kind.rawValue : message }
}
