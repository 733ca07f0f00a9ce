import DBus

/// The answer to a read or write request that is refused: an ATT error code (Core Bluetooth's
/// `CBATTError.Code`), limited to what a BlueZ GATT application can return.
///
/// BlueZ turns the D-Bus error of the application's `ReadValue`/`WriteValue` reply into the ATT
/// error the central receives (docs/bluez.md §5.2); ``bluezError`` is that D-Bus error:
///
/// | case | ATT code | D-Bus error (message) |
/// |---|---|---|
/// | ``readNotPermitted`` / ``writeNotPermitted`` | 0x02 / 0x03 | `org.bluez.Error.NotPermitted` |
/// | ``requestNotSupported`` | 0x06 | `org.bluez.Error.NotSupported` |
/// | ``invalidOffset`` | 0x07 | `org.bluez.Error.InvalidOffset` |
/// | ``insufficientAuthorization`` | 0x08 | `org.bluez.Error.NotAuthorized` |
/// | ``invalidAttributeValueLength`` | 0x0D | `org.bluez.Error.InvalidValueLength` |
/// | ``unlikelyError`` | 0x0E | `org.bluez.Error.Failed` ("0x0e": a number outside 0x80…0x9F; other text would be 0x80) |
/// | ``application(_:)`` 0x80…0x9F | that code | `org.bluez.Error.Failed` ("0x80"…"0x9f") |
/// | ``cccdImproperlyConfigured`` | 0xFD (bluetoothd before 5.76: 0x0E) | `org.bluez.Error.ImproperlyConfigured` |
///
/// Encryption and authentication (ATT 0x05, 0x0C, 0x0F) are not errors an application returns:
/// BlueZ enforces them itself from the permissions (``AttributePermissions``) before calling.
/// Whether the central sees 0x02 or 0x03 for `NotPermitted` is BlueZ's choice by operation.
public enum ATTError: Error, Sendable, Hashable, CustomStringConvertible {
    /// 0x02: the attribute cannot be read.
    case readNotPermitted
    /// 0x03: the attribute cannot be written.
    case writeNotPermitted
    /// 0x06: the request is not supported.
    case requestNotSupported
    /// 0x07: the offset is past the end of the value.
    case invalidOffset
    /// 0x08: the central is not authorized.
    case insufficientAuthorization
    /// 0x0D: the value has the wrong length.
    case invalidAttributeValueLength
    /// 0x0E: the request failed for another reason.
    case unlikelyError
    /// 0x80…0x9F: an application-defined error code (values outside that range become 0x0E).
    case application(UInt8)
    /// 0xFD, "Client Characteristic Configuration Descriptor Improperly Configured" (one of the
    /// common profile error codes of the Core Specification Supplement, 0xE0…0xFF; not 0xFF
    /// "Out of Range"). bluetoothd answers it from BlueZ 5.76 on; older bluetoothd reports 0x0E.
    case cccdImproperlyConfigured

    /// The ATT error code the central receives (from BlueZ 5.76 on for ``cccdImproperlyConfigured``).
    public var code: UInt8 {
        switch self {
        case .readNotPermitted: 0x02
        case .writeNotPermitted: 0x03
        case .requestNotSupported: 0x06
        case .invalidOffset: 0x07
        case .insufficientAuthorization: 0x08
        case .invalidAttributeValueLength: 0x0D
        case .unlikelyError: 0x0E
        case .application(let code): (0x80...0x9F).contains(code) ? code : 0x0E
        case .cccdImproperlyConfigured: 0xFD
        }
    }

    /// The error reply that makes bluetoothd answer the central with ``code``.
    public var bluezError: DBusError {
        switch self {
        case .readNotPermitted: DBusError("org.bluez.Error.NotPermitted", "Read not permitted")
        case .writeNotPermitted: DBusError("org.bluez.Error.NotPermitted", "Write not permitted")
        case .requestNotSupported: DBusError("org.bluez.Error.NotSupported", "Operation is not supported")
        case .invalidOffset: DBusError("org.bluez.Error.InvalidOffset", "Invalid offset")
        case .insufficientAuthorization: DBusError("org.bluez.Error.NotAuthorized", "Operation Not Authorized")
        case .invalidAttributeValueLength: DBusError("org.bluez.Error.InvalidValueLength", "Invalid value length")
        case .unlikelyError: DBusError("org.bluez.Error.Failed", "0x0e")
        case .application:
            DBusError("org.bluez.Error.Failed", "0x" + String(code, radix: 16, uppercase: false).leftPadded(to: 2))
        case .cccdImproperlyConfigured: DBusError("org.bluez.Error.ImproperlyConfigured", "Improperly configured")
        }
    }

    /// The error for an ATT code: the named cases for their codes, ``application(_:)`` for
    /// 0x80…0x9F, nil for codes an application cannot return.
    public init?(code: UInt8) {
        switch code {
        case 0x02: self = .readNotPermitted
        case 0x03: self = .writeNotPermitted
        case 0x06: self = .requestNotSupported
        case 0x07: self = .invalidOffset
        case 0x08: self = .insufficientAuthorization
        case 0x0D: self = .invalidAttributeValueLength
        case 0x0E: self = .unlikelyError
        case 0x80...0x9F: self = .application(code)
        case 0xFD: self = .cccdImproperlyConfigured
        default: return nil
        }
    }

    public var description: String {
        "ATT error 0x" + String(code, radix: 16).leftPadded(to: 2) + " (\(bluezError.name.rawValue))"
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
