import DBus

/// The codes both managers' error types have (``CentralError/Code``, ``PeripheralError/Code``),
/// and what the D-Bus errors of BlueZ and the bus mean in them (docs/bluez.md §2.1): one mapping,
/// the errors both roles read alike first, then each role's own (``specific(_:message:operation:)``).
protocol BlueZErrorCode: RawRepresentable<String>, Sendable {
    static var operationNotSupported: Self { get }
    static var poweredOff: Self { get }
    static var bluezUnavailable: Self { get }
    static var unauthorized: Self { get }
    static var cancelled: Self { get }
    static var failed: Self { get }
    /// The meaning of a D-Bus error the two roles read differently; nil: ``failed``.
    static func specific(_ name: String, message: String, operation: String) -> Self?
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

/// What ``CentralError`` and ``PeripheralError`` are alike: the operation that failed, and when
/// BlueZ or the bus answered with an error, its D-Bus name and message unchanged.
protocol BlueZFailure: Error {
    associatedtype Code: BlueZErrorCode
    var code: Code { get set }
    var operation: String { get }
    var bluezName: String? { get }
    var message: String { get }
    init(_ code: Code, operation: String, bluezName: String?, message: String)
}

extension BlueZFailure {
    /// The error a D-Bus error from a BlueZ call is (``BlueZErrorCode/of(_:operation:)``).
    init(dbus error: DBusError, operation: String) {
        self.init(
            Code.of(error, operation: operation), operation: operation, bluezName: error.name.rawValue,
            message: error.message)
    }

    /// `<operation> failed: <D-Bus name>: <message>`, or `<operation> failed: <message> (<code>)`
    /// for an error detected here.
    var text: String {
        if let bluezName { return "\(operation) failed: \(bluezName): \(message)" }
        return "\(operation) failed: \(message) (\(code.rawValue))"
    }

    /// Wraps any error: one of this type stays as it is, a `DBusError` is mapped, a
    /// `CancellationError` becomes `cancelled`.
    static func wrap(_ error: any Error, operation: String) -> Self {
        switch error {
        case let error as Self: error
        case let error as DBusError: Self(dbus: error, operation: operation)
        case is CancellationError: Self(.cancelled, operation: operation, bluezName: nil, message: "cancelled")
        default: Self(.failed, operation: operation, bluezName: nil, message: "\(error)")
        }
    }

    /// The same error with another code.
    func withCode(_ code: Code) -> Self {
        var copy = self
        copy.code = code
        return copy
    }
}
