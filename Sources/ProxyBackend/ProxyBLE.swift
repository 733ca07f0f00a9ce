import Bluetooth
import ESPHomeAPI
import Gateway

/// What the Bluetooth proxy's backend (``ProxyBackend``) needs from a Bluetooth LE central: the
/// port it runs its jobs against. `gattway run` implements it on BlueZ's `CentralManager`
/// (Sources/GatewayRuntime/Proxy/ProxyBLECentral.swift); the unit tests with an in-memory fake.
///
/// The synchronous members are called on the loop thread, from the backend's handling of a
/// request or an outcome. The async ones are called from jobs of the core's job runner (on the
/// loop) and must honour task cancellation; they fail with the ``ProxyFailure`` ESPHome reports
/// (the mapping of the central's errors is the port's). `Characteristic` and `Descriptor` are
/// the central's own references, found by ``connect(_:)`` and kept by the backend under their
/// ATT handles.
public protocol ProxyBLE: Sendable {
    associatedtype Characteristic: Sendable
    associatedtype Descriptor: Sendable
    associatedtype Subscription: Sendable
    associatedtype LinkEvents: Sendable

    /// Whether the central knows the device (a scan saw it recently, or it is connected or
    /// paired): one it does not know has nothing to forget. Loop thread.
    func isKnown(_ address: BluetoothAddress) -> Bool
    /// Whether the device's link is up now. Loop thread.
    func isConnected(_ address: BluetoothAddress) -> Bool

    /// Hands the address of every link that goes down, and how it ended, to `lost`, on the loop
    /// thread, until ``stopLinkEvents(_:)``.
    func linkEvents(_ lost: @escaping @Sendable (BluetoothAddress, LinkEnd) -> Void) async -> LinkEvents
    func stopLinkEvents(_ events: LinkEvents) async

    /// Connects (no automatic reconnection; a link up already — the gateway's — is used as it is
    /// and reported `adopted`), waits for the services and returns them with their handles. A
    /// device the central does not know yet is waited for until a scan sees it, within the
    /// connect's timeout.
    func connect(_ address: BluetoothAddress) async throws(ProxyFailure) -> ProxyGATT<Characteristic, Descriptor>
    /// Ends the link (no-op when it is down); returns once it is down or the attempt failed.
    func disconnect(_ address: BluetoothAddress) async

    func read(_ characteristic: Characteristic) async throws(ProxyFailure) -> [UInt8]
    func read(_ descriptor: Descriptor) async throws(ProxyFailure) -> [UInt8]
    func write(_ data: [UInt8], to characteristic: Characteristic, withResponse: Bool) async throws(ProxyFailure)
    func write(_ data: [UInt8], to descriptor: Descriptor) async throws(ProxyFailure)
    /// Starts the notifications (or indications) of `characteristic`; each value goes to
    /// `deliver`, on the loop thread, until ``endNotifications(_:)`` or the link's end.
    func notifications(of characteristic: Characteristic, _ deliver: @escaping @Sendable ([UInt8]) -> Void)
        async throws(ProxyFailure) -> Subscription
    /// Ends notifications at once (loop thread).
    func endNotifications(_ subscription: Subscription)

    /// Pairs (LE Just Works), failing with ESPHome's pairing errors.
    func pair(_ address: BluetoothAddress) async throws(ProxyFailure)
    func isPaired(_ address: BluetoothAddress) async throws(ProxyFailure) -> Bool
    /// Makes the central forget the device: its pairing, its GATT cache, its link.
    func removeDevice(_ address: BluetoothAddress) async throws(ProxyFailure)

    /// Asks for `parameters` (valid by the Core spec) on the device's link: returns when the live
    /// link uses them; throws ``ProxyFailure/notSupported`` when they were not applied to it
    /// (the port may keep them for the device's next connect). Default: not supported.
    func setConnectionParameters(_ parameters: ConnectionParameters, for address: BluetoothAddress)
        async throws(ProxyFailure)
}

extension ProxyBLE {
    public func setConnectionParameters(_ parameters: ConnectionParameters, for address: BluetoothAddress)
        async throws(ProxyFailure)
    {
        throw .notSupported
    }
}

/// A device's services as a connect found them: what the client is sent, and the central's
/// references under the ATT handles the client's requests name.
public struct ProxyGATT<Characteristic: Sendable, Descriptor: Sendable>: Sendable {
    /// The link was up before (the gateway's, or another program's): the proxy leaves it up.
    public var adopted: Bool
    public var mtu: UInt32
    public var services: [GATTServiceInfo]
    public var characteristics: [UInt16: Characteristic]
    public var descriptors: [UInt16: Descriptor]

    public init(
        adopted: Bool, mtu: UInt32, services: [GATTServiceInfo], characteristics: [UInt16: Characteristic],
        descriptors: [UInt16: Descriptor]
    ) {
        self.adopted = adopted
        self.mtu = mtu
        self.services = services
        self.characteristics = characteristics
        self.descriptors = descriptors
    }

    /// The handles of the Client Characteristic Configuration descriptors (0x2902).
    var configurationDescriptors: Set<UInt16> {
        var handles: Set<UInt16> = []
        for service in services {
            for characteristic in service.characteristics {
                for descriptor in characteristic.descriptors where descriptor.uuid == BluetoothUUID(0x2902) {
                    handles.insert(descriptor.handle)
                }
            }
        }
        return handles
    }
}

/// How a link went down, as far as the central can tell. On the management path the kernel says
/// why (its Device Disconnected event); on the D-Bus path BlueZ 5.66 tells its clients no reason
/// (`Device1.Disconnected` with one came with 5.83), only that the link is down, and whether the
/// adapter is powered.
public enum LinkEnd: Sendable, Equatable {
    /// The peer ended it, a supervision timeout, or anything else the central cannot tell apart.
    case dropped
    /// This host ended it: the central disconnected it (for the gateway, on a link the proxy's
    /// client shared), or the adapter was off already when the link went down.
    case local
    /// The HCI reason the kernel gave (0x08 supervision timeout, 0x13 the peer ended it, 0x16
    /// this host, 0x05 authentication failure).
    case reason(UInt8)

    /// The HCI reason ESPHome reports in BluetoothDeviceConnectionResponse's `error`: 0x13 (remote
    /// user terminated the connection), 0x16 (connection terminated by the local host).
    public var hciReason: Int32 {
        switch self {
        case .dropped: 0x13
        case .local: 0x16
        case .reason(let code): Int32(code)
        }
    }
}
