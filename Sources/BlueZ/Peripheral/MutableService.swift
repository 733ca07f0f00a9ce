import Bluetooth
import DBus

/// Who may read and write a local attribute, and under which security (Core Bluetooth's
/// `CBAttributePermissions`, plus BlueZ's authenticated and secure-connections levels).
///
/// BlueZ enforces them before the application is called: a central without the required
/// encryption gets ATT 0x05/0x0F and no request reaches the app. They become `Flags` entries of
/// the exported object: ``readEncryptionRequired`` → `encrypt-read`, ``writeEncryptionRequired``
/// → `encrypt-write`, and so on (``bluezFlags(for:)``).
public struct AttributePermissions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Readable without security (the default for readable characteristics).
    public static let readable = Self(rawValue: 1 << 0)
    /// Writeable without security.
    public static let writeable = Self(rawValue: 1 << 1)
    /// Reading needs an encrypted link (`encrypt-read`).
    public static let readEncryptionRequired = Self(rawValue: 1 << 2)
    /// Writing needs an encrypted link (`encrypt-write`).
    public static let writeEncryptionRequired = Self(rawValue: 1 << 3)
    /// Reading needs an authenticated (MITM-protected) pairing (`encrypt-authenticated-read`).
    public static let readAuthenticationRequired = Self(rawValue: 1 << 4)
    /// Writing needs an authenticated pairing (`encrypt-authenticated-write`).
    public static let writeAuthenticationRequired = Self(rawValue: 1 << 5)
    /// Reading needs LE Secure Connections (`secure-read`).
    public static let readSecureConnectionsRequired = Self(rawValue: 1 << 6)
    /// Writing needs LE Secure Connections (`secure-write`).
    public static let writeSecureConnectionsRequired = Self(rawValue: 1 << 7)

    /// The default: readable and writeable without security.
    public static let `default`: Self = [.readable, .writeable]

    /// The BlueZ `Flags` entries for an attribute with `properties` and these permissions: the
    /// properties' flags, then each security flag whose operation the properties allow (a
    /// security flag on an operation the attribute lacks would add that operation in BlueZ).
    public func bluezFlags(for properties: CharacteristicProperties) -> [String] {
        var flags = properties.bluezFlags
        let reads = properties.contains(.read)
        let writes = !properties.isDisjoint(with: [
            .write, .writeWithoutResponse, .authenticatedSignedWrites, .reliableWrite,
        ])
        let security: [(AttributePermissions, Bool, String)] = [
            (.readEncryptionRequired, reads, "encrypt-read"), (.writeEncryptionRequired, writes, "encrypt-write"),
            (.readAuthenticationRequired, reads, "encrypt-authenticated-read"),
            (.writeAuthenticationRequired, writes, "encrypt-authenticated-write"),
            (.readSecureConnectionsRequired, reads, "secure-read"),
            (.writeSecureConnectionsRequired, writes, "secure-write"),
        ]
        for (permission, applies, flag) in security where applies && contains(permission) && !flags.contains(flag) {
            flags.append(flag)
        }
        return flags
    }
}

/// A descriptor to publish (Core Bluetooth's `CBMutableDescriptor`), e.g. 0x2901 User Description.
///
/// The CCCD (0x2902) is not allowed: BlueZ adds one to every notify/indicate characteristic.
public struct MutableDescriptor: Sendable, Hashable {
    public var uuid: BluetoothUUID
    /// The value reads return when ``value`` is set; nil delivers reads to the app as requests.
    public var value: [UInt8]?
    /// `read`, `write` (descriptors have no other properties).
    public var properties: CharacteristicProperties
    public var permissions: AttributePermissions

    public init(
        uuid: BluetoothUUID, value: [UInt8]?, properties: CharacteristicProperties = [.read],
        permissions: AttributePermissions = .default
    ) {
        self.uuid = uuid
        self.value = value
        self.properties = properties
        self.permissions = permissions
    }

    /// A Characteristic User Description (0x2901) with `text`.
    public static func userDescription(_ text: String) -> MutableDescriptor {
        MutableDescriptor(uuid: BluetoothUUID(0x2901), value: Array(text.utf8))
    }
}

/// A characteristic to publish (Core Bluetooth's `CBMutableCharacteristic`).
///
/// ``value`` chooses who answers reads:
/// - set: the manager answers every read from the current value (this one, then each
///   ``PeripheralManager/updateValue(_:for:onSubscribedCentrals:)``); reads never reach the app.
/// - nil: every read is delivered as ``PeripheralEvent/read(_:)`` and the app answers it.
///
/// Writes are always delivered as ``PeripheralEvent/write(_:)``; they do not change the value by
/// themselves (the app calls `updateValue` when it accepts one).
public struct MutableCharacteristic: Sendable, Hashable {
    public var uuid: BluetoothUUID
    /// `read`, `write`, `writeWithoutResponse`, `notify`, `indicate` (and BlueZ's
    /// `reliableWrite`, `writableAuxiliaries`, `authorize`).
    public var properties: CharacteristicProperties
    public var permissions: AttributePermissions
    public var value: [UInt8]?
    public var descriptors: [MutableDescriptor]

    public init(
        uuid: BluetoothUUID, properties: CharacteristicProperties, value: [UInt8]? = nil,
        permissions: AttributePermissions = .default, descriptors: [MutableDescriptor] = []
    ) {
        self.uuid = uuid
        self.properties = properties
        self.permissions = permissions
        self.value = value
        self.descriptors = descriptors
    }

    /// The `Flags` of the exported `GattCharacteristic1`.
    public var bluezFlags: [String] { permissions.bluezFlags(for: properties) }
}

/// A service to publish (Core Bluetooth's `CBMutableService`).
public struct MutableService: Sendable, Hashable {
    public var uuid: BluetoothUUID
    public var isPrimary: Bool
    public var characteristics: [MutableCharacteristic]

    public init(uuid: BluetoothUUID, isPrimary: Bool = true, characteristics: [MutableCharacteristic]) {
        self.uuid = uuid
        self.isPrimary = isPrimary
        self.characteristics = characteristics
    }

    /// Checks what BlueZ would refuse, with a message naming the attribute; nil when acceptable.
    public var problem: String? {
        if service16(0x1800) || service16(0x1801) {
            return
                "service \(uuid.shortDescription) is reserved: bluetoothd publishes GAP (1800) and GATT (1801) itself"
        }
        if characteristics.isEmpty { return "service \(uuid.shortDescription) has no characteristics" }
        for characteristic in characteristics {
            let name = "characteristic \(characteristic.uuid.shortDescription) of service \(uuid.shortDescription)"
            let operations: CharacteristicProperties = [
                .read, .write, .writeWithoutResponse, .notify, .indicate, .broadcast,
                .authenticatedSignedWrites, .reliableWrite,
            ]
            if characteristic.properties.isDisjoint(with: operations) {
                return "\(name) has no properties (read, write, notify…)"
            }
            if let value = characteristic.value, value.count > 512 {
                return "\(name): a value holds at most 512 bytes, got \(value.count)"
            }
            for descriptor in characteristic.descriptors {
                if descriptor.uuid == BluetoothUUID(0x2902) {
                    return
                        "\(name): descriptor 2902 (CCCD) is added by bluetoothd for notify/indicate; do not publish it"
                }
                if !descriptor.properties.isSubset(of: [.read, .write]) || descriptor.properties.isEmpty {
                    return
                        "descriptor \(descriptor.uuid.shortDescription) of \(name): properties must be read and/or write"
                }
            }
        }
        return nil
    }

    private func service16(_ value: UInt16) -> Bool { uuid == BluetoothUUID(value) }
}

/// A service this manager publishes, as a value (Core Bluetooth's `CBService` of a
/// `CBPeripheralManager`). Identity is the exported object path: two services with the same
/// UUID added twice are different services.
public struct LocalService: Sendable, Hashable, CustomStringConvertible {
    public var uuid: BluetoothUUID
    public var isPrimary: Bool
    public var characteristics: [LocalCharacteristic]
    let path: DBusObjectPath

    public static func == (lhs: LocalService, rhs: LocalService) -> Bool { lhs.path == rhs.path }
    public func hash(into hasher: inout Hasher) { hasher.combine(path) }
    public var description: String { "local service \(uuid.shortDescription)" }
}

/// A characteristic this manager publishes: the handle for ``PeripheralManager/updateValue(_:for:onSubscribedCentrals:)``
/// and what requests and subscription events name. Identity is the exported object path.
public struct LocalCharacteristic: Sendable, Hashable, CustomStringConvertible {
    /// The UUID of the service it belongs to.
    public var service: BluetoothUUID
    public var uuid: BluetoothUUID
    public var properties: CharacteristicProperties
    public var permissions: AttributePermissions
    public var descriptors: [LocalDescriptor]
    let path: DBusObjectPath

    public static func == (lhs: LocalCharacteristic, rhs: LocalCharacteristic) -> Bool { lhs.path == rhs.path }
    public func hash(into hasher: inout Hasher) { hasher.combine(path) }
    public var description: String {
        "local characteristic \(uuid.shortDescription) of service \(service.shortDescription)"
    }
}

/// A descriptor this manager publishes. Identity is the exported object path.
public struct LocalDescriptor: Sendable, Hashable, CustomStringConvertible {
    public var characteristic: BluetoothUUID
    public var uuid: BluetoothUUID
    public var properties: CharacteristicProperties
    let path: DBusObjectPath

    public static func == (lhs: LocalDescriptor, rhs: LocalDescriptor) -> Bool { lhs.path == rhs.path }
    public func hash(into hasher: inout Hasher) { hasher.combine(path) }
    public var description: String {
        "local descriptor \(uuid.shortDescription) of characteristic \(characteristic.shortDescription)"
    }
}
