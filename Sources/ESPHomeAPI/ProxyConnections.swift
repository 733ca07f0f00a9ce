import Bluetooth
import EventLoop

/// Why an operation on the Bluetooth side failed, as ESPHome reports it to the client: an ATT
/// error code (0x01…0xFF) for a GATT request the peer refused, an ESP-IDF GATT status for a
/// connection (e.g. 0x85, ESP_GATT_ERROR), -1 when the device is not connected.
public struct ProxyFailure: Error, Sendable, Equatable {
    public var code: Int32
    public init(_ code: Int32) { self.code = code }

    /// The device is not connected through the proxy (or the link dropped).
    public static let notConnected = ProxyFailure(-1)
    /// ESP_GATT_ERROR: a connection attempt failed.
    public static let connectionFailed = ProxyFailure(0x85)
    /// ESP_GATT_NO_RESOURCES: no free connection slot, or too many requests in flight.
    public static let noResources = ProxyFailure(0x80)
    /// ATT "Invalid Handle": no attribute with this handle on the device.
    public static let invalidHandle = ProxyFailure(0x01)
    /// ESP_GATT_WRONG_STATE: not now — the device is paired (clear cache), or someone else holds
    /// its link.
    public static let wrongState = ProxyFailure(0x82)
    /// ESP_GATT_BUSY: another pair, unpair or clear cache of the device is under way.
    public static let busy = ProxyFailure(0x84)
    /// ESP_GATT_AUTH_FAIL: pairing failed (refused, cancelled, timed out).
    public static let authenticationFailed = ProxyFailure(0x89)
    /// ESP_ERR_NOT_SUPPORTED: the Bluetooth side cannot do it — connection parameters that were
    /// not applied to the live link (they may still be kept for its next connect).
    public static let notSupported = ProxyFailure(0x106)
    /// ESP_ERR_INVALID_ARG: connection parameters outside the Core spec's ranges.
    public static let invalidArgument = ProxyFailure(0x102)
}

/// What the proxy does on the Bluetooth side of connections through it; gattway implements it on
/// BlueZ's central. Called on the loop thread; every completion must be called exactly once, on
/// the loop thread (it may be later, after the server forgot the connection: then it is ignored).
/// Addresses are the 48-bit numbers of the API (0xAABBCCDDEEFF for AA:BB:CC:DD:EE:FF). Events
/// the other way (a link lost, a notification) go to ``APIServer/connectionLost(address:error:)``
/// and ``APIServer/notification(address:handle:data:)``.
public protocol BluetoothProxyBackend: AnyObject, Sendable {
    /// Connects and discovers the services; `done` gets the MTU.
    func connect(address: UInt64, addressType: UInt32, done: @escaping @Sendable (Result<UInt32, ProxyFailure>) -> Void)
    /// Disconnects (also a pending connect); no completion: the server has forgotten it already.
    func disconnect(address: UInt64)
    func services(address: UInt64, done: @escaping @Sendable (Result<[GATTServiceInfo], ProxyFailure>) -> Void)
    /// Reads the characteristic (or descriptor) with the ATT `handle`.
    func read(
        address: UInt64, handle: UInt16, descriptor: Bool,
        done: @escaping @Sendable (Result<[UInt8], ProxyFailure>) -> Void)
    func write(
        address: UInt64, handle: UInt16, descriptor: Bool, data: [UInt8], withResponse: Bool,
        done: @escaping @Sendable (ProxyFailure?) -> Void)
    /// Starts or stops the notifications of a characteristic; values go to
    /// ``APIServer/notification(address:handle:data:)``.
    func notify(address: UInt64, handle: UInt16, enable: Bool, done: @escaping @Sendable (ProxyFailure?) -> Void)

    /// Pairs with a device this client has connected through the proxy; nil when it is paired
    /// (also when it was already).
    func pair(address: UInt64, done: @escaping @Sendable (ProxyFailure?) -> Void)
    /// Removes the device's pairing; nil when it is not paired (any more, or it never was). A
    /// connection through the proxy to the device that ends with it is reported with
    /// ``APIServer/connectionLost(address:error:)`` after `done`.
    func unpair(address: UInt64, done: @escaping @Sendable (ProxyFailure?) -> Void)
    /// Drops what is cached of the device's GATT database; nil when nothing is cached (any more).
    /// A connection through the proxy that ends with it is reported after `done`, as for unpair.
    func clearCache(address: UInt64, done: @escaping @Sendable (ProxyFailure?) -> Void)

    /// Asks for `parameters` (valid by the Core spec: the server checked) on the link to a device
    /// this client has connected through the proxy; nil when the live link uses them now, else
    /// why not (``ProxyFailure/notSupported``: not applied to the live link). Default: not
    /// supported.
    func setConnectionParameters(
        address: UInt64, parameters: ConnectionParameters, done: @escaping @Sendable (ProxyFailure?) -> Void)

    /// Takes a connection slot for `address` from a budget the backend shares with others
    /// (gattway: the gateway's `bluetooth.max_connections`), at once or not at all; the server
    /// calls it right before ``connect(address:addressType:done:)``, after its own slots allowed
    /// the connection. False: the connect is refused with ``ProxyFailure/noResources``. A slot
    /// taken is the backend's to give back once that connection is over (its connect failed, or
    /// after ``disconnect(address:)`` or a lost link, once the Bluetooth side is done).
    /// Default: always true (no budget beyond the server's slots).
    func reserveSlot(address: UInt64) -> Bool

    /// Connections that shared budget allows now (nil: no bound beyond the server's own slots).
    /// The free count clients see is the smaller of this and the server's own; the backend calls
    /// ``APIServer/connectionSlotsChanged()`` when it changes for reasons of its own. Default: nil.
    var sharedFreeSlots: Int? { get }
}

extension BluetoothProxyBackend {
    public func reserveSlot(address: UInt64) -> Bool { true }
    public func setConnectionParameters(
        address: UInt64, parameters: ConnectionParameters, done: @escaping @Sendable (ProxyFailure?) -> Void
    ) {
        done(.notSupported)
    }
    public var sharedFreeSlots: Int? { nil }
}

/// One connection through the proxy: the client that asked for it (only that client may use it)
/// and whether it is up.
struct ProxyConnection {
    let owner: Int
    /// Tells a completion for this connection from one for an earlier connection to the same address.
    let id: Int
    var connected = false
    var mtu: UInt32 = 0
    /// GATT requests sent to the backend and not answered yet (bounded by ``APIServer/maxInFlight``).
    var inFlight = 0
}

extension APIServer {
    /// GATT requests one connection may have waiting on the Bluetooth side. A client that sends
    /// more (a bulk transfer of writes without response) is held back: the request that does not
    /// fit waits, with the rest of what the client sent, and the server stops reading the
    /// client's socket until it fits (TCP back-pressure, as an ESP32 proxy behaves) — so what
    /// gattway keeps for a client is at most this many requests on the Bluetooth side plus one
    /// read's worth of requests parsed.
    public static let maxInFlight = 16

    /// Whether `request` must wait: a GATT request of this client's connection that has
    /// ``maxInFlight`` requests on the Bluetooth side.
    func mustWait(_ request: APISession.ProxyRequest, for client: Client) -> Bool {
        guard case .gatt(let gatt) = request, let connection = proxyConnections[gatt.address],
            connection.owner == client.id, connection.connected
        else { return false }
        return connection.inFlight >= Self.maxInFlight
    }

    /// Serves the client's held requests that fit now, in order; once none is left the socket is
    /// read again.
    func serveHeld(_ client: Client) {
        guard !client.servingHeld else { return }
        client.servingHeld = true
        defer { client.servingHeld = false }
        var served = 0
        while let request = client.held.first {
            guard clients[client.id] != nil, !client.session.closing else { return }
            if mustWait(request, for: client) { break }
            client.held.removeFirst()
            served += 1
            serve(request, for: client)
        }
        guard served > 0, clients[client.id] != nil else { return }
        client.lastHeard = EventLoop.now()
        updateWatch(client)
        flush(client)
    }

    /// Requests held back, over all clients (tests: the bound).
    public var heldRequests: Int { clients.values.reduce(0) { $0 + $1.held.count } }

    /// The largest 48-bit address.
    static let maxAddress: UInt64 = 0xFFFF_FFFF_FFFF

    func serve(_ request: APISession.ProxyRequest, for client: Client) {
        switch request {
        case .subscribeConnectionsFree:
            client.connectionsFreeSubscribed = true
            client.session.send(connectionsFreeMessage)
        case .connect(let address, let addressType):
            connect(address, addressType: addressType, for: client)
        case .disconnect(let address):
            // The answer first, then the slots (bleak-esphome reconciles its connections with the
            // allocated list and expects the disconnect to have been reported).
            client.session.send(.deviceConnection(address: address, connected: false, mtu: 0, error: 0))
            if let connection = proxyConnections[address], connection.owner == client.id {
                proxyConnections.removeValue(forKey: address)
                backend?.disconnect(address: address)
                log(.info, "API: \(client.peer): disconnected \(Self.text(address)) through the proxy")
                broadcastConnectionsFree()
            }
        case .gatt(let gatt):
            serveGATT(gatt, for: client)
        case .setConnectionParams(let address, let parameters):
            setConnectionParameters(address, parameters, for: client)
        case .pair(let address):
            serveDeviceRequest(.pair, address, for: client)
        case .unpair(let address):
            serveDeviceRequest(.unpair, address, for: client)
        case .clearCache(let address):
            serveDeviceRequest(.clearCache, address, for: client)
        }
    }

    enum DeviceRequest {
        case pair, unpair, clearCache

        /// For the log: "could not <attempted> X", "<done> X".
        var attempted: String {
            switch self {
            case .pair: "pair"
            case .unpair: "unpair"
            case .clearCache: "clear the cache of"
            }
        }
        var done: String {
            switch self {
            case .pair: "paired"
            case .unpair: "unpaired"
            case .clearCache: "cleared the cache of"
            }
        }

        func answer(_ address: UInt64, _ failure: ProxyFailure?) -> ServerMessage {
            let error = failure?.code ?? 0
            switch self {
            case .pair: return .devicePairing(address: address, paired: failure == nil, error: error)
            case .unpair: return .deviceUnpairing(address: address, success: failure == nil, error: error)
            case .clearCache: return .deviceClearCache(address: address, success: failure == nil, error: error)
            }
        }
    }

    /// Pair (a device this client has connected), unpair and clear cache (any device not
    /// connected through the proxy by another client): one at a time per device, at most
    /// ``maxInFlight`` at once; the answer goes to the client that asked, when it is still there
    /// (and for a pairing, while its connection is the same one: its end was reported already).
    private func serveDeviceRequest(_ kind: DeviceRequest, _ address: UInt64, for client: Client) {
        func refuse(_ failure: ProxyFailure) { client.session.send(kind.answer(address, failure)) }
        guard let backend, address <= Self.maxAddress else { return refuse(.connectionFailed) }
        let connection = proxyConnections[address]
        if kind == .pair {
            guard let connection, connection.owner == client.id, connection.connected else {
                return refuse(.notConnected)
            }
        } else if let connection, connection.owner != client.id {
            return refuse(.wrongState)  // another client's link would end with it
        }
        guard deviceRequests[address] == nil else { return refuse(.busy) }
        guard deviceRequests.count < Self.maxInFlight else { return refuse(.noResources) }
        deviceRequests[address] = client.id
        let clientID = client.id
        let connectionID = connection?.id
        let done: @Sendable (ProxyFailure?) -> Void = { [weak self] failure in
            guard let self else { return }
            self.loop.preconditionInLoop()
            self.deviceRequests.removeValue(forKey: address)
            guard let owner = self.clients[clientID], !owner.session.closing else { return }
            if kind == .pair, self.proxyConnections[address]?.id != connectionID { return }
            self.log(
                .info,
                "API: \(owner.peer): "
                    + (failure.map { "could not \(kind.attempted) \(Self.text(address)) (error \($0.code))" }
                        ?? "\(kind.done) \(Self.text(address))"))
            owner.session.send(kind.answer(address, failure))
            self.flush(owner)
        }
        switch kind {
        case .pair: backend.pair(address: address, done: done)
        case .unpair: backend.unpair(address: address, done: done)
        case .clearCache: backend.clearCache(address: address, done: done)
        }
    }

    /// BluetoothSetConnectionParamsRequest: only for a link this client connected through the
    /// proxy and has up (else -1, not connected, as ESPHome answers), with parameters the Core
    /// spec allows (else ESP_ERR_INVALID_ARG, and the log line says which field), one at a time
    /// per device among the device requests; the backend's answer goes to the client while the
    /// connection is the same one.
    private func setConnectionParameters(_ address: UInt64, _ parameters: ConnectionParameters, for client: Client) {
        func answer(_ failure: ProxyFailure?) {
            client.session.send(.connectionParams(address: address, error: failure?.code ?? 0))
        }
        guard let backend, let connection = proxyConnections[address], connection.owner == client.id,
            connection.connected
        else { return answer(.notConnected) }
        if let problem = parameters.problem() {
            log(.info, "API: \(client.peer): connection parameters for \(Self.text(address)) refused: \(problem)")
            return answer(.invalidArgument)
        }
        guard deviceRequests[address] == nil else { return answer(.busy) }
        guard deviceRequests.count < Self.maxInFlight else { return answer(.noResources) }
        deviceRequests[address] = client.id
        let clientID = client.id
        let connectionID = connection.id
        backend.setConnectionParameters(address: address, parameters: parameters) { [weak self] failure in
            guard let self else { return }
            self.loop.preconditionInLoop()
            self.deviceRequests.removeValue(forKey: address)
            guard let owner = self.clients[clientID], !owner.session.closing,
                self.proxyConnections[address]?.id == connectionID
            else { return }
            self.log(
                .info,
                "API: \(owner.peer): connection parameters for \(Self.text(address)) (\(parameters)): "
                    + (failure == nil
                        ? "the link uses them"
                        : "not applied to the live link (error \(failure?.code ?? 0))"))
            owner.session.send(.connectionParams(address: address, error: failure?.code ?? 0))
            self.flush(owner)
        }
    }

    private func connect(_ address: UInt64, addressType: UInt32, for client: Client) {
        guard let backend, address <= Self.maxAddress else {
            statistics.proxyConnectFailures += 1
            client.session.send(
                .deviceConnection(
                    address: address, connected: false, mtu: 0, error: ProxyFailure.connectionFailed.code))
            return
        }
        if let existing = proxyConnections[address] {
            if existing.owner != client.id {
                // Another client's connection: refused (one owner per device, as on ESPHome).
                statistics.proxyConnectFailures += 1
                client.session.send(
                    .deviceConnection(
                        address: address, connected: false, mtu: 0, error: ProxyFailure.connectionFailed.code))
            } else if existing.connected {
                client.session.send(.deviceConnection(address: address, connected: true, mtu: existing.mtu, error: 0))
            }  // else: connecting; the answer comes when it is done
            return
        }
        // The proxy's own slots, then the budget shared with the gateway's links: never queued,
        // so Home Assistant can try another proxy at once.
        let slot = proxyConnections.count < configuration.connectionSlots
        guard slot, backend.reserveSlot(address: address) else {
            log(
                .info,
                "API: \(client.peer): no free connection slot for \(Self.text(address))"
                    + (slot ? " (the gateway's own links take the rest of bluetooth.max_connections)" : ""))
            statistics.proxyConnectFailures += 1
            client.session.send(
                .deviceConnection(address: address, connected: false, mtu: 0, error: ProxyFailure.noResources.code))
            return
        }
        let id = nextConnectionID
        nextConnectionID += 1
        proxyConnections[address] = ProxyConnection(owner: client.id, id: id)
        log(.info, "API: \(client.peer): connecting \(Self.text(address)) through the proxy")
        broadcastConnectionsFree()
        backend.connect(address: address, addressType: addressType) { [weak self] result in
            self?.connectDone(address, id: id, result)
        }
    }

    private func connectDone(_ address: UInt64, id: Int, _ result: Result<UInt32, ProxyFailure>) {
        loop.preconditionInLoop()
        guard var connection = proxyConnections[address], connection.id == id else { return }
        guard let client = clients[connection.owner] else { return }
        switch result {
        case .success(let mtu):
            connection.connected = true
            connection.mtu = mtu
            proxyConnections[address] = connection
            statistics.proxyConnects += 1
            log(.info, "API: \(client.peer): connected \(Self.text(address)) through the proxy (MTU \(mtu))")
            client.session.send(.deviceConnection(address: address, connected: true, mtu: mtu, error: 0))
            flush(client)
        case .failure(let failure):
            proxyConnections.removeValue(forKey: address)
            statistics.proxyConnectFailures += 1
            log(.info, "API: \(client.peer): could not connect \(Self.text(address)) (error \(failure.code))")
            client.session.send(.deviceConnection(address: address, connected: false, mtu: 0, error: failure.code))
            flush(client)
            broadcastConnectionsFree()
        }
    }

    private func serveGATT(_ request: GATTRequest, for client: Client) {
        let address = request.address
        let handle = request.handle
        guard let backend, var connection = proxyConnections[address], connection.owner == client.id,
            connection.connected
        else {
            client.session.send(.gattError(address: address, handle: handle, error: ProxyFailure.notConnected.code))
            return
        }
        guard connection.inFlight < Self.maxInFlight else {
            client.session.send(.gattError(address: address, handle: handle, error: ProxyFailure.noResources.code))
            return
        }
        connection.inFlight += 1
        proxyConnections[address] = connection
        let id = connection.id
        let clientID = client.id
        // Each completion: the connection must still be the same one, owned by the same client.
        let finish: @Sendable (ServerMessage?) -> Void = { [weak self] message in
            guard let self else { return }
            self.loop.preconditionInLoop()
            guard let owner = self.clients[clientID] else { return }
            if var current = self.proxyConnections[address], current.id == id {
                current.inFlight -= 1
                self.proxyConnections[address] = current
                if let message {
                    owner.session.send(message)
                    self.flush(owner)
                }
            }
            if !owner.held.isEmpty { self.serveHeld(owner) }
        }
        @Sendable func error(_ failure: ProxyFailure) -> ServerMessage {
            .gattError(address: address, handle: handle, error: failure.code)
        }
        switch request {
        case .getServices:
            let shortUUIDs =
                client.session.clientAPIVersion.major > 1
                || (client.session.clientAPIVersion.major == 1 && client.session.clientAPIVersion.minor >= 12)
            backend.services(address: address) { [weak self] result in
                switch result {
                case .success(let services):
                    // One service per message, as ESPHome sends them; then Done.
                    if let self, let current = self.proxyConnections[address], current.id == id,
                        let owner = self.clients[current.owner]
                    {
                        for service in services {
                            owner.session.send(
                                .gattServices(address: address, services: [service], shortUUIDs: shortUUIDs))
                        }
                    }
                    finish(.gattServicesDone(address: address))
                case .failure(let failure):
                    finish(error(failure))
                }
            }
        case .read(_, _), .readDescriptor(_, _):
            var descriptor = false
            if case .readDescriptor = request { descriptor = true }
            backend.read(address: address, handle: handle, descriptor: descriptor) { result in
                switch result {
                case .success(let data): finish(.gattRead(address: address, handle: handle, data: data))
                case .failure(let failure): finish(error(failure))
                }
            }
        case .write(_, _, let withResponse, let data):
            backend.write(address: address, handle: handle, descriptor: false, data: data, withResponse: withResponse) {
                failure in
                if let failure {
                    finish(error(failure))
                } else {
                    finish(withResponse ? .gattWriteDone(address: address, handle: handle) : nil)
                }
            }
        case .writeDescriptor(_, _, let data):
            backend.write(address: address, handle: handle, descriptor: true, data: data, withResponse: true) {
                failure in
                finish(failure.map(error) ?? .gattWriteDone(address: address, handle: handle))
            }
        case .notify(_, _, let enable):
            backend.notify(address: address, handle: handle, enable: enable) { failure in
                finish(failure.map(error) ?? .gattNotifyDone(address: address, handle: handle))
            }
        }
    }

    /// The link to `address` went down (the peer, a supervision timeout, the adapter): its client
    /// gets BluetoothDeviceConnectionResponse with `connected` false; the slot is free again.
    /// Loop thread.
    public func connectionLost(address: UInt64, error: Int32) {
        loop.preconditionInLoop()
        guard let connection = proxyConnections.removeValue(forKey: address) else { return }
        if let client = clients[connection.owner] {
            log(.info, "API: \(client.peer): \(Self.text(address)) disconnected (error \(error))")
            client.session.send(.deviceConnection(address: address, connected: false, mtu: 0, error: error))
            flush(client)
            // Requests held for this connection are answered now (not connected).
            if !client.held.isEmpty { serveHeld(client) }
        }
        broadcastConnectionsFree()
    }

    /// A notification or indication value of a characteristic of a connected device; sent to the
    /// client that owns the connection. Loop thread.
    public func notification(address: UInt64, handle: UInt16, data: [UInt8]) {
        loop.preconditionInLoop()
        guard let connection = proxyConnections[address], connection.connected,
            let client = clients[connection.owner], !client.session.closing
        else { return }
        client.session.send(.gattNotifyData(address: address, handle: handle, data: data))
        flush(client)
    }

    /// Frees every connection of a client that is gone (or going).
    func releaseConnections(of clientID: Int) {
        let owned = proxyConnections.filter { $0.value.owner == clientID }.map(\.key)
        guard !owned.isEmpty else { return }
        for address in owned {
            proxyConnections.removeValue(forKey: address)
            backend?.disconnect(address: address)
        }
        broadcastConnectionsFree()
    }

    /// The addresses connected (or connecting) through the proxy; loop thread.
    public var proxiedAddresses: [UInt64] { proxyConnections.keys.sorted() }

    /// BluetoothConnectionsFreeResponse now. `allocated` lists the connections through the proxy,
    /// `free` is the smaller of the proxy's own slots left and what the shared budget allows
    /// (``BluetoothProxyBackend/sharedFreeSlots``), and `limit` is their sum — so that
    /// `allocated.count == limit - free` always holds, as bleak-esphome requires (it turns off
    /// its recovery of lost disconnects otherwise). The gateway's own links therefore show as a
    /// smaller `limit`, never as slots taken by unknown addresses.
    var connectionsFreeMessage: ServerMessage {
        let slots = connectionSlots
        return .connectionsFree(
            free: UInt32(clamping: slots.free), limit: UInt32(clamping: slots.limit), allocated: slots.allocated)
    }

    /// The figures of BluetoothConnectionsFreeResponse (``connectionsFreeMessage``). Loop thread.
    public var connectionSlots: (free: Int, limit: Int, allocated: [UInt64]) {
        let slots = configuration.features.contains(.activeConnections) ? max(0, configuration.connectionSlots) : 0
        let allocated = proxiedAddresses
        var free = max(0, slots - allocated.count)
        if let shared = backend?.sharedFreeSlots { free = min(free, max(0, shared)) }
        return (free, allocated.count + free, allocated)
    }

    /// Sends the connections-free count to the subscribed clients when it differs from the
    /// last one sent.
    func broadcastConnectionsFree() {
        statistics.proxyConnections = proxyConnections.count
        let message = connectionsFreeMessage
        guard message != lastConnectionsFree else { return }
        lastConnectionsFree = message
        for client in clients.values where client.connectionsFreeSubscribed && !client.session.closing {
            client.session.send(message)
            flush(client)
        }
    }

    /// The budget the backend shares with others changed (the gateway's links came or went):
    /// the subscribed clients get the new connections-free count once this loop turn's work is
    /// done (several changes in one turn, or a change the server's own request caused, make one
    /// message or none). Loop thread.
    public func connectionSlotsChanged() {
        loop.preconditionInLoop()
        guard !slotsBroadcastScheduled else { return }
        slotsBroadcastScheduled = true
        loop.execute { [weak self] in
            guard let self else { return }
            self.slotsBroadcastScheduled = false
            self.broadcastConnectionsFree()
        }
    }

    /// `A4:C1:38:0B:12:34` (the API carries an address as a 48-bit number).
    static func text(_ address: UInt64) -> String { BluetoothAddress(rawValue: address).description }
}
