import BlueZ
import Bluetooth
import ESPHomeAPI
import EventLoop
import Gateway

/// Connections through the Bluetooth proxy on BlueZ's central (docs/ha-bluetooth-proxy.md): the
/// ``BluetoothProxyBackend`` of the ESPHome API server. A connect connects the peripheral (no
/// automatic reconnection: the client decides) and waits for its services, whose ATT handles
/// (from BlueZ's object paths `serviceXXXX/charYYYY/descZZZZ`) name characteristics and
/// descriptors in the client's requests. Only devices BlueZ knows (seen by a scan) are connected.
///
/// Slots: each connection also takes one of the gateway's connection slots
/// (`bluetooth.max_connections`, ``Gateway/reserveConnectionSlot(for:)``) from the connect until
/// the device is idle here again — no connect, no disconnect running — so the gateway's links and
/// the proxy's never exceed that budget together. A device the gateway holds a link to shares its
/// slot, and that link is left up when the client is done with it.
///
/// State is touched on the loop thread only (the invariant behind `@unchecked Sendable`); BlueZ
/// calls are jobs (``LoopJobs``: child tasks of ``run()``'s task group, on the loop) whose
/// outcomes come back through `loop.execute`. ``stop()`` waits for the disconnects under way and
/// ends the jobs.
final class ProxyCentral: BluetoothProxyBackend, @unchecked Sendable {
    let central: CentralManager
    let loop: EventLoop
    private let jobs: LoopJobs
    /// The gateway core whose connection slots the proxy shares (nil: the proxy's own slots only).
    let gateway: Gateway?
    /// Set once the server exists; events (link lost, notifications) go to it.
    weak var server: APIServer?
    private var eventsToken: ConnectionEventsToken?

    /// One device connected (or connecting) for a client.
    private struct Device {
        let generation: Int
        var connected = false
        /// It was connected already (by the gateway): the proxy does not disconnect it.
        var adopted = false
        /// An unpair or clear cache is making BlueZ forget the device: the end of its link is
        /// reported after that answer, not as a link lost.
        var removing = false
        var services: [GATTServiceInfo] = []
        var characteristics: [UInt16: Characteristic] = [:]
        var descriptors: [UInt16: Descriptor] = [:]
        var notifications: [UInt16: NotificationToken] = [:]
    }

    private var devices: [UInt64: Device] = [:]

    /// A device's `Disconnect` under way (one at a time per device).
    private struct Disconnecting {
        /// Another disconnect was asked for meanwhile: one more `Disconnect` follows this one.
        var again = false
        /// Connect jobs of the device, started once the link is down.
        var waiting: [LoopJobs.Job] = []
    }

    /// Disconnects under way (a connect to the same device waits for its end first).
    private var disconnects: [UInt64: Disconnecting] = [:]
    /// Set once no disconnect is under way, for ``stop()``.
    private var disconnectsEnded: OneShot<Void>?
    /// Devices with a connect job running or waiting (one at a time per device).
    private var connecting: Set<UInt64> = []
    /// Devices holding one of the gateway's connection slots.
    private var reservations: Set<UInt64> = []
    private var nextGeneration = 0

    init(central: CentralManager, loop: EventLoop, gateway: Gateway?) {
        self.central = central
        self.loop = loop
        self.gateway = gateway
        jobs = LoopJobs(loop: loop)
    }

    /// Runs the BlueZ calls (jobs) until ``stop()``, or until the calling task is cancelled: the
    /// jobs still running are then cancelled, and this returns once they ended.
    func run() async {
        await jobs.run()
    }

    /// Follows links going down and the gateway's free slots; call once.
    func start() async {
        let token = await central.connectionEvents { [weak self] event in
            guard let self, case .disconnected(let peripheral, _) = event else { return }
            self.linkLost(peripheral.address.rawValue)
        }
        eventsToken = token
        // The gateway's links change the free count the clients see.
        await gateway?.observeConnectionSlots { [weak self] _ in self?.server?.connectionSlotsChanged() }
    }

    /// Waits for the disconnects under way (the server's stop asks for one per connection its
    /// clients had: BlueZ answers each after its ~2 s disconnect timer), or until the calling
    /// task is cancelled (the stop's deadline); then ends the jobs (those still running are
    /// cancelled) and stops following links. Call after the server's `stop()`.
    func stop() async {
        let ended: OneShot<Void>? =
            (try? await loop.submit { [self] in
                guard !disconnects.isEmpty else { return nil }
                let ended = disconnectsEnded ?? OneShot<Void>()
                disconnectsEnded = ended
                return ended
            }) ?? nil
        if let ended { _ = await ended.wait() }
        jobs.close()
        let token: ConnectionEventsToken? =
            (try? await loop.submit { [self] in
                defer { eventsToken = nil }
                return eventsToken
            }) ?? nil
        if let token { await central.stopConnectionEvents(token) }
    }

    private func linkLost(_ address: UInt64) {
        guard let device = devices[address], device.connected, !device.removing else { return }
        forget(address)
        releaseSlotIfIdle(address)
        // 0x13: the remote device terminated the connection (the HCI reason ESPHome passes on
        // most often); BlueZ does not tell the reason to its clients.
        server?.connectionLost(address: address, error: 0x13)
    }

    /// The gateway's slot goes back once nothing runs for the device here: no connection, no
    /// connect job, no disconnect under way (the link is really down, or kept by the gateway).
    private func releaseSlotIfIdle(_ address: UInt64) {
        guard devices[address] == nil, !connecting.contains(address), disconnects[address] == nil,
            reservations.remove(address) != nil, let gateway
        else { return }
        gateway.assumeLoopIsolated { $0.releaseConnectionSlot(for: BluetoothAddress(rawValue: address)) }
    }

    /// Whether the gateway has (or is making) a link to the device: the proxy leaves it up.
    private func gatewayHolds(_ address: UInt64) -> Bool {
        gateway?.assumeLoopIsolated { $0.holdsLink(to: BluetoothAddress(rawValue: address)) } ?? false
    }

    /// Ends the device's notifications and forgets it (no BlueZ call).
    private func forget(_ address: UInt64) {
        guard let device = devices.removeValue(forKey: address) else { return }
        let tokens = Array(device.notifications.values)
        guard !tokens.isEmpty else { return }
        let central = self.central
        jobs.spawn { for token in tokens { await central.endNotifications(token) } }
    }

    private func complete(_ body: @escaping @Sendable () -> Void) { loop.execute(body) }

    // MARK: BluetoothProxyBackend

    func reserveSlot(address: UInt64) -> Bool {
        guard let gateway else { return true }
        guard gateway.assumeLoopIsolated({ $0.reserveConnectionSlot(for: BluetoothAddress(rawValue: address)) }) else {
            return false
        }
        reservations.insert(address)
        return true
    }

    var sharedFreeSlots: Int? { gateway?.assumeLoopIsolated { $0.freeConnectionSlots } }

    func connect(address: UInt64, addressType: UInt32, done: @escaping @Sendable (Result<UInt32, ProxyFailure>) -> Void)
    {
        let bluetoothAddress = BluetoothAddress(rawValue: address)
        // Only a device BlueZ knows, and not while an earlier attempt for it still runs: with the
        // server's slots this bounds the jobs a client can start however fast it connects and
        // disconnects (one Disconnect per device at a time, each about 2 s in BlueZ).
        guard loop.inLoop, central.assumeIsolated({ $0.isKnown(bluetoothAddress) }), !connecting.contains(address)
        else {
            if loop.inLoop { releaseSlotIfIdle(address) }
            return loop.execute { done(.failure(.connectionFailed)) }
        }
        connecting.insert(address)
        let generation = nextGeneration
        nextGeneration += 1
        devices[address] = Device(generation: generation)
        let central = self.central
        let job: LoopJobs.Job = { [self] in
            let result:
                Result<(UInt32, Bool, [GATTServiceInfo], [UInt16: Characteristic], [UInt16: Descriptor]), ProxyFailure>
            do {
                let adopted = await central.connectedPeripherals().contains { $0.address == bluetoothAddress }
                // A link the gateway holds is used as it is: connect() would turn off its
                // automatic reconnection.
                let peripheral =
                    adopted
                    ? await central.peripheral(bluetoothAddress)
                    : try await central.connect(
                        await central.peripheral(bluetoothAddress), timeout: .seconds(20), autoReconnect: false)
                var services: [GATTServiceInfo] = []
                var characteristics: [UInt16: Characteristic] = [:]
                var descriptors: [UInt16: Descriptor] = [:]
                var mtu = 23
                for service in try await central.discoverServices(for: peripheral) {
                    var infos: [GATTCharacteristicInfo] = []
                    for characteristic in try await central.discoverCharacteristics(for: service) {
                        characteristics[characteristic.handle] = characteristic
                        var entries: [(uuid: BluetoothUUID, handle: UInt16)] = []
                        for descriptor in try await central.discoverDescriptors(for: characteristic) {
                            descriptors[descriptor.handle] = descriptor
                            entries.append((descriptor.uuid, descriptor.handle))
                        }
                        // The handle is the one in BlueZ's path (charYYYY); the client only
                        // hands it back.
                        infos.append(
                            GATTCharacteristicInfo(
                                uuid: characteristic.uuid, handle: characteristic.handle,
                                properties: characteristic.properties.rawValue & 0xFF, descriptors: entries))
                        let length = await central.maximumWriteValueLength(for: characteristic, type: .withoutResponse)
                        mtu = max(mtu, length + 3)
                    }
                    services.append(GATTServiceInfo(uuid: service.uuid, handle: service.handle, characteristics: infos))
                }
                result = .success((UInt32(clamping: mtu), adopted, services, characteristics, descriptors))
            } catch let failure as ProxyFailure {
                result = .failure(failure)
            } catch {
                result = .failure(Self.failure(error, connecting: true))
            }
            complete { [self] in
                connecting.remove(address)
                guard var device = devices[address], device.generation == generation else {
                    // Disconnected (or the client went away) meanwhile: undo what came up,
                    // unless the gateway holds that link.
                    if case .success(let value) = result, !value.1, !gatewayHolds(address) {
                        startDisconnect(address)
                    }
                    releaseSlotIfIdle(address)
                    return
                }
                // The link may have dropped between the discovery and this turn (its event was
                // ignored while connecting): report the attempt as failed.
                var result = result
                if case .success = result, !central.assumeIsolated({ $0.peripheral(bluetoothAddress).isConnected }) {
                    result = .failure(.connectionFailed)
                }
                switch result {
                case .success(let (mtu, adopted, services, characteristics, descriptors)):
                    device.connected = true
                    device.adopted = adopted
                    device.services = services
                    device.characteristics = characteristics
                    device.descriptors = descriptors
                    devices[address] = device
                    done(.success(mtu))
                case .failure(let failure):
                    devices.removeValue(forKey: address)
                    releaseSlotIfIdle(address)
                    done(.failure(failure))
                }
            }
        }
        if disconnects[address] != nil {
            disconnects[address]?.waiting.append(job)
        } else {
            jobs.spawn(job)
        }
    }

    /// Ends the client's use of the device: the link goes down in BlueZ unless someone else
    /// holds it — it was up before the proxy connected (the gateway's, or another program's), or
    /// the gateway connected the device meanwhile — then the gateway's slot goes back.
    func disconnect(address: UInt64) {
        guard let device = devices[address] else { return }
        forget(address)
        // Also cancels a connect still running (BlueZ fails it; its completion sees the
        // generation change).
        if !device.adopted, !gatewayHolds(address) { startDisconnect(address) }
        releaseSlotIfIdle(address)
    }

    /// Disconnects in BlueZ (after a disconnect of the same device under way); the slot goes
    /// back once it is done, and connects that waited for it start.
    private func startDisconnect(_ address: UInt64) {
        guard disconnects[address] == nil else {
            disconnects[address]?.again = true
            return
        }
        disconnects[address] = Disconnecting()
        let central = self.central
        jobs.spawn { [self] in
            try? await central.disconnect(central.peripheral(BluetoothAddress(rawValue: address)))
            complete { [self] in disconnected(address) }
        }
    }

    /// A device's `Disconnect` ended: the next one, or what waited for it.
    private func disconnected(_ address: UInt64) {
        guard let ended = disconnects.removeValue(forKey: address) else { return }
        if ended.again {
            startDisconnect(address)
            disconnects[address]?.waiting = ended.waiting
            return
        }
        for job in ended.waiting { jobs.spawn(job) }
        releaseSlotIfIdle(address)
        if disconnects.isEmpty, let disconnectsEnded {
            self.disconnectsEnded = nil
            disconnectsEnded.set(())
        }
    }

    func services(address: UInt64, done: @escaping @Sendable (Result<[GATTServiceInfo], ProxyFailure>) -> Void) {
        guard let device = devices[address], device.connected else { return done(.failure(.notConnected)) }
        done(.success(device.services))
    }

    func read(
        address: UInt64, handle: UInt16, descriptor: Bool,
        done: @escaping @Sendable (Result<[UInt8], ProxyFailure>) -> Void
    ) {
        guard let device = devices[address], device.connected else { return done(.failure(.notConnected)) }
        let central = self.central
        if descriptor {
            guard let target = device.descriptors[handle] else { return done(.failure(.invalidHandle)) }
            jobs.spawn { [self] in
                let result: Result<[UInt8], ProxyFailure>
                do { result = .success(try await central.readValue(for: target)) } catch {
                    result = .failure(Self.failure(error))
                }
                complete { done(result) }
            }
        } else {
            guard let target = device.characteristics[handle] else { return done(.failure(.invalidHandle)) }
            jobs.spawn { [self] in
                let result: Result<[UInt8], ProxyFailure>
                do { result = .success(try await central.readValue(for: target)) } catch {
                    result = .failure(Self.failure(error))
                }
                complete { done(result) }
            }
        }
    }

    func write(
        address: UInt64, handle: UInt16, descriptor: Bool, data: [UInt8], withResponse: Bool,
        done: @escaping @Sendable (ProxyFailure?) -> Void
    ) {
        guard let device = devices[address], device.connected else { return done(.notConnected) }
        let central = self.central
        if descriptor {
            guard let target = device.descriptors[handle] else { return done(.invalidHandle) }
            // BlueZ owns the CCCD: notifications are switched with the notify request.
            guard target.uuid != BluetoothUUID(0x2902) else { return done(nil) }
            jobs.spawn { [self] in
                var failure: ProxyFailure?
                do { try await central.writeValue(data, for: target) } catch { failure = Self.failure(error) }
                complete { [failure] in done(failure) }
            }
        } else {
            guard let target = device.characteristics[handle] else { return done(.invalidHandle) }
            jobs.spawn { [self] in
                var failure: ProxyFailure?
                do {
                    try await central.writeValue(
                        data, for: target, type: withResponse ? .withResponse : .withoutResponse)
                } catch { failure = Self.failure(error) }
                complete { [failure] in done(failure) }
            }
        }
    }

    func notify(address: UInt64, handle: UInt16, enable: Bool, done: @escaping @Sendable (ProxyFailure?) -> Void) {
        guard let device = devices[address], device.connected else { return done(.notConnected) }
        guard let target = device.characteristics[handle] else { return done(.invalidHandle) }
        let central = self.central
        if !enable {
            if let token = devices[address]?.notifications.removeValue(forKey: handle) {
                jobs.spawn { await central.endNotifications(token) }
            }
            return done(nil)
        }
        guard device.notifications[handle] == nil else { return done(nil) }
        let generation = device.generation
        jobs.spawn { [self] in
            var failure: ProxyFailure?
            var token: NotificationToken?
            do {
                token = try await central.notifications(for: target) { [weak self] delivery in
                    // On the loop thread, as each value arrives.
                    guard let self, case .value(let data) = delivery else { return }
                    self.server?.notification(address: address, handle: handle, data: data)
                }
            } catch { failure = Self.failure(error) }
            complete { [self, token, failure] in
                if let token {
                    if devices[address]?.generation == generation, devices[address]?.notifications[handle] == nil {
                        devices[address]?.notifications[handle] = token
                    } else {
                        jobs.spawn { await central.endNotifications(token) }
                    }
                }
                done(failure)
            }
        }
    }

    // MARK: Pairing and the cache

    /// `Device1.Pair` on the device this client connected (LE Just Works: gattway registers no
    /// agent, so bluetoothd pairs as NoInputNoOutput), 20 s at most.
    func pair(address: UInt64, done: @escaping @Sendable (ProxyFailure?) -> Void) {
        guard let device = devices[address], device.connected else { return done(.notConnected) }
        let central = self.central
        jobs.spawn { [self] in
            var failure: ProxyFailure?
            do {
                try await central.pair(
                    await central.peripheral(BluetoothAddress(rawValue: address)), timeout: .seconds(20))
            } catch {
                failure = Self.pairingFailure(error)
            }
            complete { [failure] in done(failure) }
        }
    }

    /// A paired device is forgotten (`Adapter1.RemoveDevice`: its keys, and with them BlueZ's GATT
    /// cache; its link drops). One BlueZ does not know, or that is not paired, is left as it is.
    func unpair(address: UInt64, done: @escaping @Sendable (ProxyFailure?) -> Void) {
        forgetDevice(address, done: done) { paired in paired ? nil : .some(nil) }
    }

    /// BlueZ keeps no GATT cache apart from the device (and no call drops only the cache): the
    /// device is forgotten (`Adapter1.RemoveDevice`), so the next connect discovers its services
    /// afresh. Refused (ESP_GATT_WRONG_STATE) where that would do more than drop a cache: a paired
    /// device (its bond would go: unpair it instead), a device whose link is someone else's (the
    /// gateway's, another program's). One BlueZ does not know has no cache.
    func clearCache(address: UInt64, done: @escaping @Sendable (ProxyFailure?) -> Void) {
        let bluetoothAddress = BluetoothAddress(rawValue: address)
        let linkedElsewhere =
            gatewayHolds(address) || devices[address]?.adopted == true
            || (devices[address] == nil && central.assumeIsolated { $0.peripheral(bluetoothAddress).isConnected })
        guard !linkedElsewhere else { return done(.wrongState) }
        forgetDevice(address, done: done) { paired in paired ? .some(.wrongState) : nil }
    }

    /// Asks BlueZ whether the device is paired; `decide` answers with the outcome to give without
    /// removing the device (`.some`), or nil to remove it. The answer goes first; then the end of
    /// this proxy's connection to it, when the removal ended it.
    private func forgetDevice(
        _ address: UInt64, done: @escaping @Sendable (ProxyFailure?) -> Void,
        decide: @escaping @Sendable (_ paired: Bool) -> ProxyFailure??
    ) {
        let bluetoothAddress = BluetoothAddress(rawValue: address)
        // Not known to BlueZ: nothing paired, nothing cached.
        guard central.assumeIsolated({ $0.isKnown(bluetoothAddress) }) else { return done(nil) }
        let generation = devices[address]?.generation
        if generation != nil { devices[address]?.removing = true }
        let central = self.central
        jobs.spawn { [self] in
            var failure: ProxyFailure?
            var removed = false
            do {
                let peripheral = await central.peripheral(bluetoothAddress)
                if let outcome = decide(try await central.isPaired(peripheral)) {
                    failure = outcome
                } else {
                    try await central.removeDevice(peripheral)
                    removed = true
                }
            } catch {
                failure = .connectionFailed
            }
            complete { [self, failure, removed] in
                done(failure)
                guard let generation, devices[address]?.generation == generation else { return }
                if central.assumeIsolated({ $0.peripheral(bluetoothAddress).isConnected }) {
                    devices[address]?.removing = false
                } else {
                    forget(address)
                    releaseSlotIfIdle(address)
                    // 0x16: the connection terminated by the local host.
                    server?.connectionLost(address: address, error: removed ? 0x16 : 0x13)
                }
            }
        }
    }

    /// BlueZ's refusal of a pairing as ESPHome reports it: ESP_GATT_AUTH_FAIL when the
    /// authentication failed, was rejected, cancelled (the link dropped) or timed out; ESP_GATT_BUSY
    /// when another pairing runs; else ESP_GATT_ERROR.
    static func pairingFailure(_ error: any Error) -> ProxyFailure {
        guard let error = error as? CentralError else { return .connectionFailed }
        if error.bluezName?.hasPrefix("org.bluez.Error.Authentication") == true || error.code == .connectionTimeout {
            return .authenticationFailed
        }
        if error.code == .inProgress { return .busy }
        return .connectionFailed
    }

    /// BlueZ's error as the ESPHome client expects it: the ATT code when the peer answered with
    /// one, -1 when the link is down, else ESP_GATT_ERROR (0x85).
    static func failure(_ error: any Error, connecting: Bool = false) -> ProxyFailure {
        guard let error = error as? CentralError else { return .connectionFailed }
        if let att = error.attError { return ProxyFailure(Int32(att)) }
        switch error.code {
        case .notConnected, .peripheralDisconnected: return connecting ? .connectionFailed : .notConnected
        case .operationNotSupported: return ProxyFailure(0x06)  // ATT Request Not Supported
        case .notPermitted: return ProxyFailure(0x02)  // read / write not permitted
        case .invalidValueLength: return ProxyFailure(0x0D)
        default: return .connectionFailed
        }
    }
}
