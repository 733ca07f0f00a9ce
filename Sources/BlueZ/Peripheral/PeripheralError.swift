import DBus

/// The one error type of the ``PeripheralManager``, with Core Bluetooth's meanings (`CBError`):
/// ``BlueZOperationError`` with the peripheral's codes, e.g.
/// `org.bluez.GattManager1.RegisterApplication failed: org.bluez.Error.Failed: No valid service object found`.
public typealias PeripheralError = BlueZOperationError<PeripheralErrorCode>

/// What went wrong in a peripheral manager's operation, in Core Bluetooth terms.
public enum PeripheralErrorCode: String, Sendable, Hashable, CaseIterable {
    /// The adapter is powered off (or BlueZ answered `NotReady`), or the manager is not `.poweredOn`.
    case poweredOff
    /// bluetoothd is not on the bus, or went away during the operation.
    case bluezUnavailable
    /// The bus denied access to BlueZ (`AccessDenied`).
    case unauthorized
    /// The adapter has no `GattManager1` / `LEAdvertisingManager1` (not LE capable), or BlueZ
    /// answered `NotSupported`.
    case operationNotSupported
    /// A service, characteristic or descriptor is not acceptable (a reserved UUID such as
    /// 0x1800/0x1801 or the CCCD 0x2902, no properties, a duplicate), or BlueZ refused the
    /// application (`Failed` "No valid service object found").
    case invalidService
    /// The characteristic or service is not (or no longer) published by this manager.
    case unknownAttribute
    /// A value longer than an attribute can hold (512 bytes).
    case invalidValueLength
    /// The advertisement does not fit the 31-byte legacy advertising payload
    /// (`CBError.Code` has no such case; checked before anything is sent to BlueZ).
    case advertisementTooLarge
    /// BlueZ could not parse the advertisement (`Failed` "Failed to parse advertisement.").
    case invalidAdvertisement
    /// The controller has no free advertising instance (`NotPermitted` "Maximum advertisements reached").
    case tooManyAdvertisements
    /// The object is already registered (`AlreadyExists`); `CBError.Code.alreadyAdvertising`.
    case alreadyExists
    /// The manager was closed.
    case cancelled
    /// Any other failure; see ``bluezName`` and ``message``.
    case failed
}

extension PeripheralErrorCode: BlueZErrorCode {
    /// What the peripheral reads in the D-Bus errors the central reads otherwise.
    public static func specific(_ name: String, message: String, operation: String) -> Self? {
        switch name {
        case DBusError.Name.unknownMethod.rawValue, DBusError.Name.unknownInterface.rawValue: .operationNotSupported
        case "org.bluez.Error.AlreadyExists": .alreadyExists
        // A bad advertisement for advertising calls, a bad tree otherwise.
        case "org.bluez.Error.InvalidArguments", "org.bluez.Error.InvalidLength":
            operation.contains("Advertis") ? .invalidAdvertisement : .invalidService
        case "org.bluez.Error.NotPermitted": message.contains("Maximum advertisements") ? .tooManyAdvertisements : nil
        case "org.bluez.Error.DoesNotExist", DBusError.Name.unknownObject.rawValue: .unknownAttribute
        case "org.bluez.Error.Failed":
            if message.hasPrefix("Failed to parse advertisement") {
                .invalidAdvertisement
            } else if message.contains("service object") || message == "No object received"
                || message.hasPrefix("Failed to create entry")
            {
                .invalidService
            } else {
                nil
            }
        default: nil
        }
    }

    /// 0x0D for a value longer than an attribute holds, the one ATT error that corresponds. (The
    /// peripheral's own answers to centrals are ``ATTError``s.)
    public func attError(bluezName: String?, message: String) -> UInt8? { self == .invalidValueLength ? 0x0D : nil }

    /// `CBError` 9 alreadyAdvertising, 1 invalidParameters (a service or advertisement it
    /// refuses), 2 invalidHandle (an attribute not published), 5 operationCancelled, 13
    /// operationNotSupported, 0 unknown.
    public var cbErrorCode: Int? {
        switch self {
        case .failed: 0
        case .invalidService, .invalidAdvertisement, .advertisementTooLarge: 1
        case .unknownAttribute: 2
        case .cancelled: 5
        case .alreadyExists: 9
        case .operationNotSupported: 13
        case .invalidValueLength, .poweredOff, .bluezUnavailable, .unauthorized, .tooManyAdvertisements: nil
        }
    }
}
