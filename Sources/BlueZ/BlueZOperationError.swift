import DBus

/// The codes of both managers' errors (``CentralErrorCode``, ``PeripheralErrorCode``), and what
/// the D-Bus errors of BlueZ and the bus mean in them (docs/bluez.md §2.1): one mapping, the
/// errors both roles read alike first, then each role's own (``specific(_:message:operation:)``).
public protocol BlueZErrorCode: RawRepresentable<String>, Sendable, Hashable, CaseIterable {
    static var operationNotSupported: Self { get }
    static var poweredOff: Self { get }
    static var bluezUnavailable: Self { get }
    static var unauthorized: Self { get }
    static var cancelled: Self { get }
    static var failed: Self { get }
    /// The meaning of a D-Bus error the two roles read differently; nil: ``failed``.
    static func specific(_ name: String, message: String, operation: String) -> Self?
    /// The ATT error code an error of this code, with BlueZ's `bluezName` and `message`, stands
    /// for (``BlueZOperationError/attError``).
    func attError(bluezName: String?, message: String) -> UInt8?
    /// The `CBError.Code` raw value (`CBErrorDomain`) that corresponds, where one does.
    var cbErrorCode: Int? { get }
}

extension BlueZErrorCode {
    /// The Core Bluetooth meaning of a D-Bus error from a BlueZ call.
    static func of(_ error: DBusError, operation: String) -> Self {
        let name = error.name.rawValue
        switch name {
        case "org.bluez.Error.NotSupported": return .operationNotSupported
        case "org.bluez.Error.NotReady": return .poweredOff
        case DBusError.Name.serviceUnknown.rawValue, DBusError.Name.nameHasNoOwner.rawValue,
            DBusError.Name.disconnected.rawValue, DBusError.Name.noReply.rawValue:
            return .bluezUnavailable
        case DBusError.Name.accessDenied.rawValue: return .unauthorized
        default: return specific(name, message: error.message, operation: operation) ?? .failed
        }
    }
}

/// The one error type of both managers (``CentralError``, ``PeripheralError``), with Core
/// Bluetooth's meanings in its ``Code``.
///
/// Every error names the operation that failed and, when BlueZ (or the bus) answered with an
/// error, carries its D-Bus error name and message unchanged, e.g.
/// `org.bluez.Device1.Connect failed: org.bluez.Error.Failed: le-connection-abort-by-local`.
public struct BlueZOperationError<ErrorCode: BlueZErrorCode>: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, in Core Bluetooth terms (`CentralError.Code`, `PeripheralError.Code`).
    public typealias Code = ErrorCode

    /// The Core Bluetooth meaning.
    public var code: Code
    /// The operation, e.g. `org.bluez.Device1.Connect` or `add service 180F`.
    public var operation: String
    /// The D-Bus error name when BlueZ or the bus answered with one (`org.bluez.Error.Failed`).
    public var bluezName: String?
    /// BlueZ's message, or ours when the error was detected locally.
    public var message: String

    public init(_ code: Code, operation: String, bluezName: String? = nil, message: String) {
        self.code = code
        self.operation = operation
        self.bluezName = bluezName
        self.message = message
    }

    /// Maps a D-Bus error from a BlueZ call to its Core Bluetooth meaning (docs/bluez.md §2.1,
    /// §2.2, §5.1, §5.3; ``BlueZErrorCode``).
    public init(_ error: DBusError, operation: String) {
        self.init(
            Code.of(error, operation: operation), operation: operation, bluezName: error.name.rawValue,
            message: error.message)
    }

    /// `<operation> failed: <D-Bus name>: <message>`, or `<operation> failed: <message> (<code>)`
    /// for an error detected here.
    public var description: String {
        if let bluezName { return "\(operation) failed: \(bluezName): \(message)" }
        return "\(operation) failed: \(message) (\(code.rawValue))"
    }

    /// The ATT error code the peer answered with (the central, read back from BlueZ's reply), or
    /// that corresponds (the peripheral: 0x0D for a value longer than an attribute holds).
    public var attError: UInt8? { code.attError(bluezName: bluezName, message: message) }

    /// Core Bluetooth's numeric error, as its delegate callbacks would report it: the ATT code
    /// in `CBATTErrorDomain` when there is one (``attError``; `CBATTError.Code`'s raw values are
    /// the ATT codes, application errors passed through), else the `CBError.Code` raw value in
    /// `CBErrorDomain` that corresponds. Nil where Core Bluetooth has no error for it (it reports
    /// a powered-off adapter or a missing authorization as a state, not an error; bluetoothd
    /// missing from the bus has no counterpart).
    public var coreBluetoothError: CoreBluetoothErrorCode? {
        if let attError { return CoreBluetoothErrorCode(domain: .att, code: Int(attError)) }
        return code.cbErrorCode.map { CoreBluetoothErrorCode(domain: .central, code: $0) }
    }

    /// Wraps any error: one of this type stays as it is, a `DBusError` is mapped, a
    /// `CancellationError` becomes `cancelled`.
    static func wrap(_ error: any Error, operation: String) -> Self {
        switch error {
        case let error as Self: error
        case let error as DBusError: Self(error, operation: operation)
        case is CancellationError: Self(.cancelled, operation: operation, message: "cancelled")
        default: Self(.failed, operation: operation, message: "\(error)")
        }
    }

    /// The same error with another code.
    func withCode(_ code: Code) -> Self {
        var copy = self
        copy.code = code
        return copy
    }
}
