/// A numeric Core Bluetooth error: the value an app on Apple's platforms would find in the
/// `NSError` of a delegate callback (`domain` and `code`), for callers that report errors in
/// those terms. ``CentralError/coreBluetoothError`` and ``PeripheralError/coreBluetoothError``.
public struct CoreBluetoothErrorCode: Sendable, Hashable, CustomStringConvertible {
    public enum Domain: String, Sendable, Hashable {
        /// `CBErrorDomain`: `CBError.Code` raw values (0 unknown, 1 invalidParameters,
        /// 3 notConnected, 5 operationCancelled, 6 connectionTimeout, 7 peripheralDisconnected,
        /// 9 alreadyAdvertising, 10 connectionFailed, 12 unknownDevice, 13 operationNotSupported).
        case central = "CBErrorDomain"
        /// `CBATTErrorDomain`: `CBATTError.Code` raw values, which are the ATT error codes.
        case att = "CBATTErrorDomain"
    }

    public var domain: Domain
    public var code: Int

    public init(domain: Domain, code: Int) {
        self.domain = domain
        self.code = code
    }

    public var description: String { "\(domain.rawValue) \(code)" }
}
