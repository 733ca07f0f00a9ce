import Bluetooth
import DBus

/// A remote central as a GATT request names it (Core Bluetooth's `CBCentral`): BlueZ passes the
/// device object path (`/org/bluez/hci1/dev_AA_BB_…`), from which the address is taken.
public struct Central: Sendable, Hashable, CustomStringConvertible {
    public var address: BluetoothAddress
    public init(address: BluetoothAddress) { self.address = address }
    public var description: String { "central \(address)" }

    /// The central of a BlueZ device path, nil when the last component is not `dev_XX_…`.
    init?(devicePath: DBusObjectPath) {
        guard let last = devicePath.rawValue.split(separator: "/").last, last.hasPrefix("dev_"),
            let address = BluetoothAddress(String(last.dropFirst(4)).replacing("_", with: ":"))
        else { return nil }
        self.address = address
    }
}

/// The transport a request came over (BlueZ's `link` option).
public enum LinkType: String, Sendable, Hashable {
    case le = "LE"
    case bredr = "BR/EDR"
}

/// The attribute a request is for.
public enum LocalAttribute: Sendable, Hashable, CustomStringConvertible {
    case characteristic(LocalCharacteristic)
    case descriptor(LocalDescriptor)

    public var uuid: BluetoothUUID {
        switch self {
        case .characteristic(let characteristic): characteristic.uuid
        case .descriptor(let descriptor): descriptor.uuid
        }
    }

    public var description: String {
        switch self {
        case .characteristic(let characteristic): characteristic.description
        case .descriptor(let descriptor): descriptor.description
        }
    }
}

/// What BlueZ passes with every request (`device`, `mtu`, `link`, `offset`).
public struct RequestContext: Sendable, Hashable {
    /// The requesting central; nil when BlueZ did not name a device.
    public var central: Central?
    /// Where the read starts or the write goes, in bytes (0 unless a long read/write).
    public var offset: Int
    /// The negotiated ATT MTU of the link, when BlueZ passed it; at most `mtu - 1` bytes fit in a
    /// read response and `mtu - 3` in a notification.
    public var mtu: Int?
    public var link: LinkType?

    public init(central: Central? = nil, offset: Int = 0, mtu: Int? = nil, link: LinkType? = nil) {
        self.central = central
        self.offset = offset
        self.mtu = mtu
        self.link = link
    }

    /// Parses BlueZ's options dictionary (`a{sv}`); unknown keys are ignored.
    init(options: DBusValue?) {
        let options = options?.dictionary ?? [:]
        central = options["device"]?.objectPath.flatMap(Central.init(devicePath:))
        offset = options["offset"]?.int ?? 0
        mtu = options["mtu"]?.int
        link = options["link"]?.string.flatMap(LinkType.init(rawValue:))
    }
}

/// A read of a local attribute whose value the app provides (Core Bluetooth's `CBATTRequest`
/// passed to `peripheralManager(_:didReceiveRead:)`).
///
/// Answer exactly once with ``respond(with:)``, ``respond(withWholeValue:)`` or
/// ``fail(_:)``; later answers are ignored. A request dropped without an answer is answered
/// `org.freedesktop.DBus.Error.Failed` (ATT 0x0E Unlikely Error) when its last copy goes away;
/// bluetoothd itself gives up after its D-Bus timeout (25 s).
public struct ReadRequest: Sendable {
    public let attribute: LocalAttribute
    public let context: RequestContext
    let reply: DBusPendingReply

    public var central: Central? { context.central }
    public var offset: Int { context.offset }

    /// Answers with `value`, the bytes starting at ``offset`` (as BlueZ expects).
    public func respond(with value: [UInt8]) {
        reply.succeed([.bytes(value)])
    }

    /// Answers with the part of `value` starting at ``offset``; ATT 0x07 Invalid Offset when the
    /// offset lies beyond its end.
    public func respond(withWholeValue value: [UInt8]) {
        guard offset <= value.count else { return fail(.invalidOffset) }
        respond(with: Array(value[offset...]))
    }

    /// Refuses the read with an ATT error.
    public func fail(_ error: ATTError) {
        reply.fail(error.bluezError)
    }
}

/// A write to a local attribute (Core Bluetooth's `CBATTRequest` passed to
/// `peripheralManager(_:didReceiveWrite:)`).
///
/// When ``expectsResponse`` is false (a Write Command, or any write to a characteristic with
/// `writeWithoutResponse`, which bluetoothd acknowledges itself), the manager has already
/// answered BlueZ and ``respond()``/``fail(_:)`` do nothing. Otherwise answer exactly once;
/// an unanswered request fails as ``ReadRequest`` describes.
public struct WriteRequest: Sendable {
    public let attribute: LocalAttribute
    public let context: RequestContext
    /// The bytes written at ``offset``.
    public let value: [UInt8]
    /// Whether the central waits for the answer (false for write-without-response).
    public let expectsResponse: Bool
    /// True for BlueZ's `prepare-authorize` call: a prepared (long/reliable) write asks whether it
    /// may proceed; nothing is written yet.
    public let isPrepareAuthorization: Bool
    let reply: DBusPendingReply

    public var central: Central? { context.central }
    public var offset: Int { context.offset }

    /// Accepts the write.
    public func respond() {
        reply.succeed([])
    }

    /// Refuses the write with an ATT error.
    public func fail(_ error: ATTError) {
        reply.fail(error.bluezError)
    }
}

/// Everything a ``PeripheralManager`` reports, in order, from ``PeripheralManager/events(bufferingNewest:)``.
///
/// Requests come as events rather than handler closures so an app handles them in one `for await`
/// loop with its other state (as `CBPeripheralManagerDelegate` does on one queue), and answers
/// each one when it is ready — also after awaiting something else.
public enum PeripheralEvent: Sendable {
    /// A read of an attribute without a cached value; answer it.
    case read(ReadRequest)
    /// A write; answer it when ``WriteRequest/expectsResponse``.
    case write(WriteRequest)
    /// A central enabled notifications or indications (bluetoothd's `StartNotify`, called again
    /// for each further central; BlueZ names no central here).
    case subscribed(LocalCharacteristic)
    /// The last subscribed central disabled them or disconnected (bluetoothd's `StopNotify`).
    case unsubscribed(LocalCharacteristic)
    /// A central confirmed an indication (bluetoothd's `Confirm`).
    case indicationConfirmed(LocalCharacteristic)
    /// BlueZ accepted the GATT application with these services (after ``PeripheralManager/add(_:)``,
    /// ``PeripheralManager/remove(_:)``, and again after a bluetoothd restart or power cycle).
    case servicesRegistered([LocalService])
    /// BlueZ accepted the advertisement (at start, after an update that re-registered, after recovery).
    case advertisingStarted
    /// Advertising stopped without ``PeripheralManager/stopAdvertising()``: bluetoothd called
    /// `Release`, went away, or the adapter was powered off. It is registered again when BlueZ is
    /// back (``advertisingStarted`` follows).
    case advertisingStopped(reason: String)
    /// Registering again after a bluetoothd restart or power cycle failed.
    case registrationFailed(PeripheralError)
}
