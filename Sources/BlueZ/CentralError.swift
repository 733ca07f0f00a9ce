import DBus
import Retry

/// The one error type of the central, with Core Bluetooth's meanings (`CBError`, `CBATTError`):
/// ``BlueZOperationError`` with the central's codes.
public typealias CentralError = BlueZOperationError<CentralErrorCode>

/// What went wrong in a central's operation, in Core Bluetooth terms.
public enum CentralErrorCode: String, Sendable, Hashable, CaseIterable {
    /// Connecting did not finish within the timeout (the attempt was cancelled).
    case connectionTimeout
    /// BlueZ could not establish the link (`Failed` "le-connection-abort-by-local" and friends).
    case connectionFailed
    /// The link dropped (peer, supervision timeout, adapter power-off) during or before the operation.
    case peripheralDisconnected
    /// The peripheral or BlueZ does not support the operation (`NotSupported`); never retried.
    case operationNotSupported
    /// The peripheral refused: read/write not permitted, not paired, not authorized.
    case notPermitted
    /// The value is too long for the write type, or the peripheral rejected its length.
    case invalidValueLength
    /// BlueZ rejected the arguments (e.g. "Invalid offset").
    case invalidArguments
    /// Another operation is in progress (`InProgress`).
    case inProgress
    /// The peripheral is not connected.
    case notConnected
    /// BlueZ does not know this device (it vanished) or the characteristic does not exist.
    case unknownDevice
    /// bluetoothd is not on the bus, or went away during the operation.
    case bluezUnavailable
    /// The bus denied access to BlueZ (`AccessDenied`).
    case unauthorized
    /// The adapter is powered off (or BlueZ answered `NotReady`), or the manager is not `.poweredOn`.
    case poweredOff
    /// The operation was cancelled by the caller (e.g. ``CentralManager/disconnect(_:)`` during a connect).
    case cancelled
    /// Any other failure; see ``bluezName`` and ``message``.
    case failed
}

extension CentralError {
    /// How the reconnect policy should treat this error.
    var reconnectFailure: ReconnectPolicy<SystemRandomNumberGenerator>.Failure {
        switch code {
        case .connectionTimeout, .connectionFailed, .unknownDevice, .bluezUnavailable, .poweredOff, .inProgress:
            .connectionTimeout
        case .peripheralDisconnected, .notConnected: .peripheralDisconnected
        case .operationNotSupported: .operationNotSupported
        case .notPermitted, .unauthorized, .invalidValueLength, .invalidArguments, .cancelled: .other(retryable: false)
        case .failed: .other(retryable: true)
        }
    }
}

extension CentralErrorCode: BlueZErrorCode {
    /// What the central reads in the D-Bus errors the peripheral reads otherwise.
    public static func specific(_ name: String, message: String, operation: String) -> Self? {
        switch name {
        case "org.bluez.Error.NotPermitted", "org.bluez.Error.NotAuthorized": .notPermitted
        case "org.bluez.Error.InvalidArguments", "org.bluez.Error.InvalidValueLength", "org.bluez.Error.InvalidOffset":
            message.lowercased().contains("length") || name.hasSuffix("InvalidValueLength")
                ? .invalidValueLength : .invalidArguments
        case "org.bluez.Error.InProgress": .inProgress
        case "org.bluez.Error.NotConnected": .notConnected
        case "org.bluez.Error.DoesNotExist", DBusError.Name.unknownObject.rawValue,
            DBusError.Name.unknownMethod.rawValue:
            .unknownDevice
        case "org.bluez.Error.Failed":
            if message.hasPrefix("le-connection-") || message.hasPrefix("br-connection-") {
                message.hasSuffix("-canceled") ? .cancelled : .connectionFailed
            } else if message == "Not connected" {
                .notConnected
            } else if message.hasPrefix("Operation already in progress") {
                .inProgress
            } else {
                nil
            }
        default: nil
        }
    }

    /// The ATT error code the peer answered with, read back from BlueZ's reply (docs/bluez.md
    /// §2.2): 0x02/0x03 from "Read/Write not permitted", 0x05 from "Not paired" (BlueZ merges
    /// 0x05, 0x0C and 0x0F into it), 0x07, 0x08, 0x0D from their messages, and any other code —
    /// 0x0E, application errors 0x80…0x9F, 0xFD… — from "Operation failed with ATT error: 0xNN".
    /// Nil when the failure was not an ATT error response, and for 0x06 Request Not Supported:
    /// BlueZ answers it exactly as its own refusal of an operation the characteristic does not
    /// declare (`NotSupported` "Operation is not supported"), so the two cannot be told apart
    /// (both are ``operationNotSupported``).
    public func attError(bluezName: String?, message: String) -> UInt8? {
        switch (bluezName, message) {
        case ("org.bluez.Error.NotPermitted", "Read not permitted"): 0x02
        case ("org.bluez.Error.NotPermitted", "Write not permitted"): 0x03
        case ("org.bluez.Error.NotPermitted", "Not paired"): 0x05
        case ("org.bluez.Error.InvalidArguments", "Invalid offset"): 0x07
        case ("org.bluez.Error.NotAuthorized", "Operation Not Authorized"): 0x08
        case ("org.bluez.Error.InvalidArguments", "Invalid Length"): 0x0D
        case ("org.bluez.Error.Failed", _):
            Self.attCode(in: message)
        default: nil
        }
    }

    /// The "0xNN" at the end of "Operation failed with ATT error: 0xNN".
    private static func attCode(in message: String) -> UInt8? {
        let prefix = "Operation failed with ATT error: 0x"
        guard message.hasPrefix(prefix) else { return nil }
        let digits = message.utf8.dropFirst(prefix.utf8.count)
        guard digits.count == 2 else { return nil }
        return UInt8(String(decoding: digits, as: UTF8.self), radix: 16)
    }

    /// The `CBError.Code` raw value that corresponds: none for a refusal or a wrong length (those
    /// are ATT errors), nor for the states Core Bluetooth reports as states.
    public var cbErrorCode: Int? {
        switch self {
        case .failed: 0  // unknown
        case .invalidArguments: 1  // invalidParameters
        case .notConnected: 3
        case .cancelled: 5  // operationCancelled
        case .connectionTimeout: 6
        case .peripheralDisconnected: 7
        case .connectionFailed: 10
        case .unknownDevice: 12
        case .operationNotSupported: 13
        case .notPermitted: nil
        case .invalidValueLength: nil
        case .inProgress, .bluezUnavailable, .unauthorized, .poweredOff: nil
        }
    }
}
