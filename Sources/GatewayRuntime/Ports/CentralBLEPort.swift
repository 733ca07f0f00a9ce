import BlueZ
import Bluetooth
import Gateway
import JSON
import Synchronization

/// The gateway's ``BLEPort`` over the BlueZ ``CentralManager``s of its adapters
/// (``GatewayAdapters``): one radio for the gateway.
///
/// Every adapter scans, and each report reaches the gateway as it is, whichever adapter heard
/// it: the gateway knows a device by its address, so a frame two adapters heard is one frame of
/// one device, published once by its repeated-frame check (docs/config.md, "Several adapters").
/// A link goes through the adapter ``GatewayAdapters`` chooses (the strongest that has a free
/// slot), and the device's GATT operations follow it there.
///
/// The gateway owns reconnection (its connection scheduler bounds concurrent connects and
/// queues them fairly), so every connect here asks the central *not* to reconnect on its own.
/// Scan results, notification values and link changes reach the gateway synchronously on the
/// loop thread that runs the centrals and the gateway (docs/architecture.md).
public struct CentralBLEPort: BLEPort {
    public let adapters: GatewayAdapters
    /// `bluetooth.scan_mode` for the gateway's scan (nil: active).
    let scanMode: ScanModeController?

    /// The first adapter's central.
    public var central: CentralManager { adapters.primary }

    public init(central: CentralManager) {
        self.init(adapters: GatewayAdapters(central: central), scanMode: nil)
    }

    public init(adapters: GatewayAdapters) {
        self.init(adapters: adapters, scanMode: nil)
    }

    init(adapters: GatewayAdapters, scanMode: ScanModeController?) {
        self.adapters = adapters
        self.scanMode = scanMode
    }

    /// Results come to `deliver` from each central's handling of a report, on the loop thread:
    /// no stream, no task in between. Asked for while an adapter cannot be used, its scan starts
    /// by itself once it can (also after it was pulled out and plugged in again).
    public func scan(services: [BluetoothUUID], _ deliver: @escaping @Sendable (BLEDiscovery) -> Void)
        async throws(BLEPortError)
        -> PortRegistration
    {
        try await scan(services: services, raw: false, deliver)
    }

    /// With `raw`, each discovery carries the kernel's AD bytes (the management path), for the
    /// raw radio. The address type is always passed on (the kernel report's, else BlueZ's
    /// `AddressType`): presence resolves only random addresses.
    public func scan(
        services: [BluetoothUUID], raw: Bool, _ deliver: @escaping @Sendable (BLEDiscovery) -> Void
    )
        async throws(BLEPortError)
        -> PortRegistration
    {
        var tokens: [(CentralManager, ScanToken)] = []
        let scanMode = self.scanMode
        let adapters = self.adapters
        do {
            for (index, central) in adapters.centrals.enumerated() {
                let token = try await central.scan(
                    ScanOptions(
                        services: services.isEmpty ? nil : services, allowDuplicates: true,
                        mode: scanMode?.initialMode ?? .active), waitingForAdapter: true
                ) { result in
                    adapters.heard(index, result.peripheral.address, rssi: result.advertisementData.rssi)
                    scanMode?.heard(result.advertisementData.localName)
                    var discovery = BLEDiscovery(
                        address: result.peripheral.address, advertisement: result.advertisementData,
                        adapter: UInt8(truncatingIfNeeded: index), addressType: result.peripheral.addressType)
                    if raw { discovery.data = result.kernelReport?.data }
                    deliver(discovery)
                }
                tokens.append((central, token))
            }
        } catch {
            for (central, token) in tokens { await central.stopScan(token) }
            throw Self.portError(error)
        }
        if let scanMode {
            let attached = tokens
            try? await loop(scanMode) { controller in
                for (central, token) in attached { controller.attach(token, on: central) }
            }
        }
        let stop = tokens
        return PortRegistration {
            for (central, token) in stop { central.onLoop { $0.stopScan(token) } }
        }
    }

    private func loop(_ scanMode: ScanModeController, _ body: @escaping @Sendable (ScanModeController) -> Void)
        async throws
    {
        try await scanMode.loop.submit { body(scanMode) }
    }

    /// One connect-and-discover attempt, bounded as a whole by `timeout` (`connect_timeout`):
    /// the time BlueZ takes to resolve the services counts too. When the services are not
    /// resolved in what is left, the link is dropped again and the attempt is a timeout.
    public func connect(_ address: BluetoothAddress, timeout: Double) async throws(BLEPortError) {
        let clock = ContinuousClock()
        let deadline = clock.now + Duration.milliseconds(Int64(saturating: timeout * 1000))
        let index = await adapters.claimForConnect(address)
        let central = adapters.centrals[index]
        let peripheral = await central.peripheral(address)
        do {
            try await central.connect(peripheral, timeout: deadline - clock.now, autoReconnect: false)
        } catch {
            adapters.release(address, on: index)
            throw Self.portError(error)
        }
        do {
            let left = deadline - clock.now
            guard left > .zero else {
                throw CentralError(
                    .connectionTimeout, operation: "discover services of \(address)",
                    message: "no time left of connect_timeout (\(timeout) s) to resolve the services")
            }
            _ = try await central.discoverServices(nil, for: peripheral, timeout: left)
        } catch {
            try? await central.disconnect(peripheral)
            adapters.release(address, on: index)
            throw Self.portError(error)
        }
    }

    /// Load Connection Parameters on the management socket
    /// (``CentralManager/loadConnectionParameters(_:for:)``), for every adapter: the connect
    /// picks its adapter afterwards.
    public func loadConnectionParameters(_ parameters: ConnectionParameters, for address: BluetoothAddress)
        async throws(BLEPortError)
    {
        for central in adapters.centrals {
            do { try await central.loadConnectionParameters(parameters, for: address) } catch {
                throw Self.portError(error)
            }
        }
    }

    public func preferAdapter(_ adapter: String, floorDBm: Int, for address: BluetoothAddress) {
        adapters.prefer(adapter, floorDBm: floorDBm, for: address)
    }

    public func disconnect(_ address: BluetoothAddress) async {
        let central = adapters.central(for: address)
        try? await central.disconnect(await central.peripheral(address))
    }

    public func discover(_ address: BluetoothAddress, services: [BluetoothUUID]?) async throws(BLEPortError)
        -> [BLECharacteristic]
    {
        let central = adapters.central(for: address)
        do {
            var found: [BLECharacteristic] = []
            for service in try await central.discoverServices(services, for: await central.peripheral(address)) {
                for characteristic in try await central.discoverCharacteristics(nil, for: service) {
                    found.append(
                        BLECharacteristic(
                            service: service.uuid, uuid: characteristic.uuid, properties: characteristic.properties))
                }
            }
            return found
        } catch {
            throw Self.portError(error)
        }
    }

    /// Values come to `deliver` from the central's read of the `AcquireNotify` datagram (or its
    /// handling of the `Value` signal), on the loop thread; the central is the one with the link.
    public func notifications(
        _ address: BluetoothAddress, characteristic: BLECharacteristic, _ deliver: @escaping @Sendable ([UInt8]) -> Void
    ) async throws(BLEPortError) -> PortRegistration {
        let central = adapters.central(for: address)
        let token: NotificationToken
        do {
            token = try await central.notifications(for: try await resolve(address, characteristic, on: central)) {
                delivery in
                if case .value(let value) = delivery { deliver(value) }
            }
        } catch let error as BLEPortError {
            throw error
        } catch {
            throw Self.portError(error)
        }
        return PortRegistration { central.onLoop { $0.endNotifications(token) } }
    }

    public func read(_ address: BluetoothAddress, characteristic: BLECharacteristic) async throws(BLEPortError)
        -> [UInt8]
    {
        let central = adapters.central(for: address)
        do {
            return try await central.readValue(for: try await resolve(address, characteristic, on: central))
        } catch let error as BLEPortError {
            throw error
        } catch {
            throw Self.portError(error)
        }
    }

    public func write(
        _ address: BluetoothAddress, characteristic: BLECharacteristic, value: [UInt8], withResponse: Bool
    )
        async throws(BLEPortError)
    {
        let central = adapters.central(for: address)
        do {
            try await central.writeValue(
                value, for: try await resolve(address, characteristic, on: central),
                type: withResponse ? .withResponse : .withoutResponse)
        } catch let error as BLEPortError {
            throw error
        } catch {
            throw Self.portError(error)
        }
    }

    /// Link changes come to `deliver` as the centrals notice them, on the loop thread. A link
    /// that came up carries what BlueZ remembers of the device, for matching device rules. An
    /// adapter's return to `poweredOn` (powered on again, plugged in again) comes as
    /// ``BLEConnectionEvent/adapterReady``; the adapters' condition as one
    /// ``BLEConnectionEvent/adapter(_:)``: the first adapter that cannot be used, else the first.
    /// A link lost with its adapter (a dongle pulled) is lost like any other; a link down on one
    /// adapter while another has the device connected is not the device's.
    public func connectionEvents(_ deliver: @escaping @Sendable (BLEConnectionEvent) -> Void) async -> PortRegistration
    {
        let adapters = self.adapters
        let conditions = AdapterConditions(count: adapters.centrals.count)
        var stops: [@Sendable (isolated CentralManager) -> Void] = []
        for (index, central) in adapters.centrals.enumerated() {
            let token = await central.connectionEvents { event in
                switch event {
                case .disconnected(let peripheral, let error):
                    adapters.release(peripheral.address, on: index)
                    guard !adapters.connectedElsewhere(peripheral.address, than: index) else { return }
                    deliver(.disconnected(peripheral.address, reason: error.map(Self.portError)))
                case .connected(let peripheral):
                    guard adapters.claim(peripheral.address, on: index) else { return }
                    let known = central.assumeIsolated { $0.rememberedAdvertisementData(peripheral.address) }
                    deliver(.connected(BLEDiscovery(address: peripheral.address, advertisement: known)))
                case .failedToConnect:
                    break  // the connect call that failed reports it
                }
            }
            // The adapter usable again after it was not (powered off, bluetoothd restarting,
            // pulled out): told once per return, from the central's handling of the change.
            let usable = AdapterUsable()
            let states = await central.stateUpdates { state in
                if usable.changed(to: state == .poweredOn) { deliver(.adapterReady) }
            }
            // The adapter's condition, now and at each change, with what to do (AdapterAdvice).
            let updates = await central.conditionUpdates { condition in
                guard condition != .unknown else { return }
                let status = central.assumeIsolated { AdapterAdvice.status(condition, of: $0) }
                if let combined = conditions.changed(index, status) { deliver(.adapter(combined)) }
            }
            stops.append { central in
                central.stopStateUpdates(states)
                central.stopConditionUpdates(updates)
                central.stopConnectionEvents(token)
            }
        }
        let registered = Array(zip(adapters.centrals, stops))
        return PortRegistration {
            for (central, stop) in registered { central.onLoop(stop) }
        }
    }

    /// Whether the adapter was usable at the last state change (nil: no change seen yet).
    private final class AdapterUsable: Sendable {
        private let usable = Mutex<Bool?>(nil)

        /// Records `now`; true when the adapter became usable again after it was not.
        func changed(to now: Bool) -> Bool {
            usable.withLock { usable in
                defer { usable = now }
                return now && usable == false
            }
        }
    }

    /// The adapters' conditions as one: the first adapter that cannot be used, else the first.
    final class AdapterConditions: Sendable {
        private let state: Mutex<(each: [BLEAdapterStatus?], told: BLEAdapterStatus?)>

        init(count: Int) { state = Mutex((Array(repeating: nil, count: count), nil)) }

        /// Records adapter `index`'s status; the combined one when it changed.
        func changed(_ index: Int, _ status: BLEAdapterStatus) -> BLEAdapterStatus? {
            state.withLock { state in
                state.each[index] = status
                let known = state.each.compactMap { $0 }
                guard let combined = known.first(where: { !$0.usable }) ?? known.first, combined != state.told
                else { return nil }
                state.told = combined
                return combined
            }
        }
    }

    /// The peripherals of the centrals' state files (`central.json` in the state directory: the
    /// devices they had links to or were subscribed to when the previous run died — a crash, a
    /// kill, a power cut —, or the links up at its clean stop), with what BlueZ still remembers
    /// of each and the saved name.
    public func restoredDevices() async -> [BLEDiscovery] {
        var devices: [BLEDiscovery] = []
        for central in adapters.centrals {
            for device in await central.restoredDevices()
            where !devices.contains(where: { $0.address == device.address }) {
                devices.append(device)
            }
        }
        return devices
    }

    /// The centrals keep the restored `devices` and forget the saved subscriptions `wanted`
    /// rejects (``CentralManager/keepRestored(peripherals:where:)``).
    public func keepRestored(
        devices: Set<BluetoothAddress>, _ wanted: @escaping @Sendable (BluetoothAddress, BLECharacteristic) -> Bool
    ) async {
        for central in adapters.centrals {
            await central.keepRestored(peripherals: { devices.contains($0) }) { saved in
                wanted(saved.peripheral, BLECharacteristic(service: saved.service, uuid: saved.uuid, properties: []))
            }
        }
    }

    /// The MTU of the link, from the central that has it (``CentralManager/attMTU(_:)``).
    public func attMTU(_ address: BluetoothAddress) async -> Int? {
        await adapters.central(for: address).attMTU(address)
    }

    /// Every central writes its state file as the stop leaves it and keeps it so
    /// (``CentralManager/keepStateForRestart()``).
    public func keepStateForRestart() async {
        for central in adapters.centrals { await central.keepStateForRestart() }
    }

    /// The D-Bus round trip of the first central's last Peer.Ping to bluetoothd, in seconds.
    public func lastRoundTripLatency() -> Double? {
        central.lastRoundTrip.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
    }

    /// `central`'s characteristic for the gateway's (service, uuid) pair.
    private func resolve(_ address: BluetoothAddress, _ wanted: BLECharacteristic, on central: CentralManager)
        async throws -> Characteristic
    {
        let peripheral = await central.peripheral(address)
        for service in try await central.discoverServices([wanted.service], for: peripheral) {
            if let match = try await central.discoverCharacteristics([wanted.uuid], for: service).first { return match }
        }
        throw BLEPortError(.notFound, "\(address) has no characteristic \(wanted)")
    }

    /// The central's error in the gateway's terms (the kinds share Core Bluetooth's meanings).
    public static func portError(_ error: any Error) -> BLEPortError {
        guard let central = error as? CentralError else { return BLEPortError(.other, "\(error)") }
        let kind: BLEPortError.Kind
        switch central.code {
        case .connectionTimeout: kind = .connectionTimeout
        case .connectionFailed: kind = .connectionTimeout  // "le-connection-abort-by-local": retry like a timeout
        case .peripheralDisconnected: kind = .peripheralDisconnected
        case .operationNotSupported: kind = .operationNotSupported
        case .notPermitted: kind = .notPermitted
        case .invalidValueLength: kind = .invalidValueLength
        case .notConnected: kind = .notConnected
        case .unknownDevice: kind = .notFound
        case .bluezUnavailable, .poweredOff, .unauthorized: kind = .unavailable
        case .invalidArguments, .inProgress, .cancelled, .failed: kind = .other
        }
        return BLEPortError(kind, central.description, attError: central.attError)
    }
}

extension CentralManager {
    /// ``restoredPeripherals`` with ``rememberedAdvertisementData(_:)`` of each (the saved name
    /// when BlueZ has none).
    fileprivate func restoredDevices() -> [BLEDiscovery] {
        restoredPeripherals.map { peripheral in
            var data = rememberedAdvertisementData(peripheral.address)
            if data.localName == nil { data.localName = peripheral.name }
            return BLEDiscovery(address: peripheral.address, advertisement: data)
        }
    }

    /// Runs `body` isolated to the central: now when called on its loop thread, else on the
    /// loop's next turn (the gateway ends registrations from its loop; nothing waits for it).
    nonisolated func onLoop(_ body: @escaping @Sendable (isolated CentralManager) -> Void) {
        if loop.inLoop {
            assumeIsolated { body($0) }
        } else {
            loop.execute { [self] in assumeIsolated { body($0) } }
        }
    }
}
