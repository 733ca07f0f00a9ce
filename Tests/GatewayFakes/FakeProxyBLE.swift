import Bluetooth
import ESPHomeAPI
import EventLoop
import ProxyBackend
import Synchronization

/// The GATT layout the Bluetooth proxy's tests give a device: one service 180F (handle 0x0A)
/// with the battery level 2A19 (handle 0x0B: read, notify) and its CCCD (0x0D).
public enum ProxyGATTFixture {
    public static let batteryService = [
        GATTServiceInfo(
            uuid: BluetoothUUID(0x180F), handle: 0x0A,
            characteristics: [
                GATTCharacteristicInfo(
                    uuid: BluetoothUUID(0x2A19), handle: 0x0B, properties: 0x12,
                    descriptors: [(BluetoothUUID(0x2902), 0x0D)])
            ])
    ]
}

/// The proxy's port in memory: devices with a few handles, links, notifications; records the
/// connects and disconnects the backend's jobs make. Links the gateway's own fake port
/// (`gatewayBLE`) has up count as up here too (one radio): a connect to such a device is adopted.
/// Deliveries (a link lost, a notification value) reach the backend on the loop thread, as the
/// central's do.
public final class FakeProxyBLE: ProxyBLE {
    /// A characteristic or descriptor: the device and the handle.
    public struct Attribute: Sendable {
        public let address: BluetoothAddress
        public let handle: UInt16
    }
    /// A descriptor (a type of its own: the port tells the two apart by type).
    public struct DescriptorAttribute: Sendable {
        public let attribute: Attribute
    }
    public typealias Characteristic = Attribute
    public typealias Descriptor = DescriptorAttribute
    public typealias Subscription = Int
    public typealias LinkEvents = Int

    private struct State {
        var known: Set<BluetoothAddress> = []
        var links: Set<BluetoothAddress> = []
        var connects: [BluetoothAddress] = []
        var disconnects: [BluetoothAddress] = []
        var lost: (@Sendable (BluetoothAddress, LinkEnd) -> Void)?
        var subscriptions: [Int: (address: BluetoothAddress, handle: UInt16, deliver: @Sendable ([UInt8]) -> Void)] =
            [:]
        var nextSubscription = 0
        var reads: [UInt16: [UInt8]] = [0x0B: [73]]
        var removed: [BluetoothAddress] = []
    }

    private let state = Mutex(State())
    public let loop: EventLoop
    public let gatewayBLE: InMemoryBLE
    /// Disconnects wait here (open by default); a cancelled wait leaves the link as it is.
    public let disconnectGate = Gate()

    public init(loop: EventLoop, gatewayBLE: InMemoryBLE) {
        self.loop = loop
        self.gatewayBLE = gatewayBLE
    }

    public func add(_ address: BluetoothAddress) { state.withLock { _ = $0.known.insert(address) } }
    public var connects: [BluetoothAddress] { state.withLock { $0.connects } }
    public var disconnects: [BluetoothAddress] { state.withLock { $0.disconnects } }
    public var subscriptionCount: Int { state.withLock { $0.subscriptions.count } }

    /// The device drops the link the proxy made.
    public func dropLink(_ address: BluetoothAddress, _ end: LinkEnd = .dropped) {
        let lost = state.withLock { state in
            state.links.remove(address)
            state.subscriptions = state.subscriptions.filter { $0.value.address != address }
            return state.lost
        }
        loop.execute { lost?(address, end) }
    }

    /// The device notifies a value of `handle`.
    public func notify(_ address: BluetoothAddress, _ handle: UInt16, _ value: [UInt8]) {
        let targets = state.withLock { state in
            state.subscriptions.values.filter { $0.address == address && $0.handle == handle }.map(\.deliver)
        }
        loop.execute { for deliver in targets { deliver(value) } }
    }

    public func isKnown(_ address: BluetoothAddress) -> Bool { state.withLock { $0.known.contains(address) } }

    public func isConnected(_ address: BluetoothAddress) -> Bool {
        state.withLock { $0.links.contains(address) } || gatewayBLE.isConnected(address)
    }

    public func linkEvents(_ lost: @escaping @Sendable (BluetoothAddress, LinkEnd) -> Void) async -> Int {
        state.withLock { $0.lost = lost }
        return 1
    }

    public func stopLinkEvents(_ events: Int) async { state.withLock { $0.lost = nil } }

    public func connect(_ address: BluetoothAddress) async throws(ProxyFailure) -> ProxyGATT<
        Attribute, DescriptorAttribute
    > {
        let adopted = gatewayBLE.isConnected(address)
        let known = state.withLock { state in
            state.connects.append(address)
            return state.known.contains(address)
        }
        // A device nobody hears: the central's wait for it ends in its timeout.
        guard adopted || known else { throw .connectionFailed }
        if !adopted { state.withLock { _ = $0.links.insert(address) } }
        return ProxyGATT(
            adopted: adopted, mtu: 517, services: ProxyGATTFixture.batteryService,
            characteristics: [0x0B: Attribute(address: address, handle: 0x0B)],
            descriptors: [0x0D: DescriptorAttribute(attribute: Attribute(address: address, handle: 0x0D))])
    }

    public func disconnect(_ address: BluetoothAddress) async {
        state.withLock { $0.disconnects.append(address) }
        await disconnectGate.wait()
        if Task.isCancelled { return }
        state.withLock { state in
            state.links.remove(address)
            state.subscriptions = state.subscriptions.filter { $0.value.address != address }
        }
    }

    public func read(_ characteristic: Attribute) async throws(ProxyFailure) -> [UInt8] {
        guard let value = state.withLock({ $0.reads[characteristic.handle] }) else { throw ProxyFailure(0x02) }
        return value
    }

    public func read(_ descriptor: DescriptorAttribute) async throws(ProxyFailure) -> [UInt8] { [0, 0] }
    public func write(_ data: [UInt8], to characteristic: Attribute, withResponse: Bool) async throws(ProxyFailure) {}
    public func write(_ data: [UInt8], to descriptor: DescriptorAttribute) async throws(ProxyFailure) {}

    public func notifications(of characteristic: Attribute, _ deliver: @escaping @Sendable ([UInt8]) -> Void)
        async throws(ProxyFailure) -> Int
    {
        state.withLock { state in
            state.nextSubscription += 1
            state.subscriptions[state.nextSubscription] = (characteristic.address, characteristic.handle, deliver)
            return state.nextSubscription
        }
    }

    public func endNotifications(_ subscription: Int) {
        state.withLock { _ = $0.subscriptions.removeValue(forKey: subscription) }
    }
    public func pair(_ address: BluetoothAddress) async throws(ProxyFailure) {}
    public func isPaired(_ address: BluetoothAddress) async throws(ProxyFailure) -> Bool { false }

    /// Forgets the device: its link ends (without a link event: the backend reports it itself).
    public func removeDevice(_ address: BluetoothAddress) async throws(ProxyFailure) {
        state.withLock { state in
            state.removed.append(address)
            state.known.remove(address)
            state.links.remove(address)
        }
    }

    public var removed: [BluetoothAddress] { state.withLock { $0.removed } }
}

/// The server's side as the backend sees it: records what it is told.
public final class RecordingServer: ProxyEvents {
    private struct State {
        var lost: [(address: UInt64, error: Int32)] = []
        var notifications: [(address: UInt64, handle: UInt16, data: [UInt8])] = []
        var slotsChanged = 0
        var statistics = APIServerStatistics()
    }

    private let state = Mutex(State())

    public init() {}

    public var lost: [(address: UInt64, error: Int32)] { state.withLock { $0.lost } }
    public var notifications: [(address: UInt64, handle: UInt16, data: [UInt8])] { state.withLock { $0.notifications } }
    public var slotsChanged: Int { state.withLock { $0.slotsChanged } }

    public func setStatistics(_ change: (inout APIServerStatistics) -> Void) {
        state.withLock { change(&$0.statistics) }
    }

    public func connectionLost(address: UInt64, error: Int32) { state.withLock { $0.lost.append((address, error)) } }
    public func notification(address: UInt64, handle: UInt16, data: [UInt8]) {
        state.withLock { $0.notifications.append((address, handle, data)) }
    }
    public func connectionSlotsChanged() { state.withLock { $0.slotsChanged += 1 } }
    public var statistics: APIServerStatistics { state.withLock { $0.statistics } }
}
