import BlueZ
import Bluetooth
import ESPHomeAPI
import Gateway
import ProxyBackend

/// The Bluetooth proxy's port (``ProxyBLE``) on BlueZ's central: the calls ``ProxyBackend``'s
/// jobs make, with BlueZ's errors as ESPHome reports them. A connect uses a link up already (the
/// gateway's) as it is — `connect()` would turn off its automatic reconnection — and otherwise
/// connects with no automatic reconnection (the client decides), 20 s at most; the handles are
/// the ones in BlueZ's object paths (`serviceXXXX/charYYYY/descZZZZ`), and the MTU is the write
/// length of the characteristics plus 3 (23 without one). Pairing goes through the central's
/// pairing agent, as the gateway's own: a passkey or a numeric comparison the device asks for
/// is asked on MQTT (`pairing_request`; Home Assistant cannot answer one), and the pairing fails
/// with ESP_GATT_AUTH_FAIL when nobody answers within `bluetooth.pairing_timeout`. It may take
/// that timeout plus 20 s.
///
/// With several adapters (``GatewayAdapters``) a connection goes through the adapter that hears
/// the device best with a free slot, as the gateway's do, and every call for the device goes to
/// that adapter's central.
struct ProxyBLECentral: ProxyBLE {
    let adapters: GatewayAdapters
    /// `bluetooth.pairing_timeout`: how long a pairing question waits for its answer on MQTT.
    var pairingTimeout: Double = 25
    var log: GatewayLogger = .none

    /// A notification subscription and the central it is on.
    struct Subscription: Sendable {
        let central: CentralManager
        let token: NotificationToken
    }

    /// Known to bluetoothd, or heard by the kernel (a passive scan: bluetoothd learns it while
    /// the connect waits, ``CentralManager/connect(_:timeout:autoReconnect:)``).
    func isKnown(_ address: BluetoothAddress) -> Bool {
        adapters.centrals.contains { $0.assumeLoopIsolated { $0.isKnown(address) || $0.heardByKernel(address) } }
    }

    func isConnected(_ address: BluetoothAddress) -> Bool {
        adapters.central(for: address).assumeLoopIsolated { $0.peripheral(address).isConnected }
    }

    /// A link lost on one adapter while another has the device connected is not the device's.
    /// On the management path the kernel's reason (read on the loop's next turn, outside the
    /// central's event: reading the socket hands reports to the centrals); else ended locally
    /// when the central asked for it (no error: the gateway's disconnect) or the adapter was
    /// powered off, and anything else is the peer's as far as BlueZ tells.
    func linkEvents(_ lost: @escaping @Sendable (BluetoothAddress, LinkEnd) -> Void) async -> [ConnectionEventsToken] {
        let adapters = self.adapters
        var tokens: [ConnectionEventsToken] = []
        for (index, central) in adapters.centrals.enumerated() {
            tokens.append(
                await central.connectionEvents { event in
                    guard case .disconnected(let peripheral, let error) = event,
                        !adapters.connectedElsewhere(peripheral.address, than: index)
                    else { return }
                    let local = error == nil || error?.code == .poweredOff
                    let guess: LinkEnd = local ? .local : .dropped
                    let address = peripheral.address
                    central.loop.execute {
                        let told = central.assumeLoopIsolated { $0.kernelDisconnectReason(address) }?.hciCode
                        lost(address, told.map { .reason($0) } ?? guess)
                    }
                })
        }
        return tokens
    }

    func stopLinkEvents(_ events: [ConnectionEventsToken]) async {
        for (central, token) in zip(adapters.centrals, events) { await central.stopConnectionEvents(token) }
    }

    func connect(_ address: BluetoothAddress) async throws(ProxyFailure) -> ProxyGATT<Characteristic, Descriptor> {
        let index = await adapters.claimForConnect(address)
        let central = adapters.centrals[index]
        do {
            let adopted = await central.connectedPeripherals().contains { $0.address == address }
            // Parameters a client asked for on an earlier link: loaded again, as the kernel keeps
            // the peer's own wishes in their place once the peer asks for others (docs/bluez.md §7.3).
            if !adopted, let parameters = await central.loadedConnectionParameters(address) {
                try? await central.loadConnectionParameters(parameters, for: address)
            }
            let peripheral =
                adopted
                ? await central.peripheral(address)
                : try await central.connect(
                    await central.peripheral(address), timeout: .seconds(20), autoReconnect: false)
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
                    infos.append(
                        GATTCharacteristicInfo(
                            uuid: characteristic.uuid, handle: characteristic.handle,
                            properties: characteristic.properties.rawValue & 0xFF, descriptors: entries))
                    let length = await central.maximumWriteValueLength(for: characteristic, type: .withoutResponse)
                    mtu = max(mtu, length + 3)
                }
                services.append(GATTServiceInfo(uuid: service.uuid, handle: service.handle, characteristics: infos))
            }
            return ProxyGATT(
                adopted: adopted, mtu: UInt32(clamping: mtu), services: services, characteristics: characteristics,
                descriptors: descriptors)
        } catch {
            log(.debug, "Bluetooth proxy: connecting \(address) failed: \(error)")
            if !(await central.peripheral(address).isConnected) { adapters.release(address, on: index) }
            throw Self.failure(error, connecting: true)
        }
    }

    func disconnect(_ address: BluetoothAddress) async {
        let central = adapters.central(for: address)
        try? await central.disconnect(central.peripheral(address))
    }

    func read(_ characteristic: Characteristic) async throws(ProxyFailure) -> [UInt8] {
        let central = adapters.central(for: characteristic.peripheral)
        do { return try await central.readValue(for: characteristic) } catch { throw Self.failure(error) }
    }

    func read(_ descriptor: Descriptor) async throws(ProxyFailure) -> [UInt8] {
        let central = adapters.central(for: descriptor.characteristic.peripheral)
        do { return try await central.readValue(for: descriptor) } catch { throw Self.failure(error) }
    }

    func write(_ data: [UInt8], to characteristic: Characteristic, withResponse: Bool) async throws(ProxyFailure) {
        let central = adapters.central(for: characteristic.peripheral)
        do {
            try await central.writeValue(
                data, for: characteristic, type: withResponse ? .withResponse : .withoutResponse)
        } catch {
            throw Self.failure(error)
        }
    }

    func write(_ data: [UInt8], to descriptor: Descriptor) async throws(ProxyFailure) {
        let central = adapters.central(for: descriptor.characteristic.peripheral)
        do { try await central.writeValue(data, for: descriptor) } catch { throw Self.failure(error) }
    }

    func notifications(of characteristic: Characteristic, _ deliver: @escaping @Sendable ([UInt8]) -> Void)
        async throws(ProxyFailure) -> Subscription
    {
        let central = adapters.central(for: characteristic.peripheral)
        do {
            let token = try await central.notifications(for: characteristic) { delivery in
                // On the loop thread, as each value arrives.
                guard case .value(let data) = delivery else { return }
                deliver(data)
            }
            return Subscription(central: central, token: token)
        } catch {
            throw Self.failure(error)
        }
    }

    func endNotifications(_ subscription: Subscription) {
        subscription.central.assumeLoopIsolated { $0.endNotifications(subscription.token) }
    }

    func pair(_ address: BluetoothAddress) async throws(ProxyFailure) {
        let central = adapters.central(for: address)
        let limit = Duration.milliseconds(Int64(saturating: (pairingTimeout + 20) * 1000))
        do {
            try await central.pair(await central.peripheral(address), timeout: limit)
        } catch {
            let failure = Self.pairingFailure(error)
            log(
                .warning,
                "Bluetooth proxy: pairing of \(address) failed (ESPHome error \(failure.code)): \(error)\(failure == .authenticationFailed ? " — a passkey or comparison the device asks for is answered on MQTT (bridge/request/device/pair/confirm), not by Home Assistant" : "")"
            )
            throw failure
        }
    }

    func isPaired(_ address: BluetoothAddress) async throws(ProxyFailure) -> Bool {
        let central = adapters.central(for: address)
        do { return try await central.isPaired(await central.peripheral(address)) } catch {
            throw .connectionFailed
        }
    }

    func removeDevice(_ address: BluetoothAddress) async throws(ProxyFailure) {
        let central = adapters.central(for: address)
        do { try await central.removeDevice(await central.peripheral(address)) } catch { throw .connectionFailed }
    }

    /// Loads the parameters into the kernel for the device (Load Connection Parameters on the
    /// management socket), so its next connect asks for them; the live link keeps its own — Linux
    /// 6.1 does not update a link from that command, and the HCI command that would (LE
    /// Connection Update) needs a raw HCI socket with `CAP_NET_RAW`, which the service does not
    /// have (docs/bluez.md §7.2) — so the answer is always not supported.
    func setConnectionParameters(_ parameters: ConnectionParameters, for address: BluetoothAddress)
        async throws(ProxyFailure)
    {
        let central = adapters.central(for: address)
        try? await central.loadConnectionParameters(parameters, for: address)
        throw .notSupported
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
