import BlueZ
import Bluetooth
import ESPHomeAPI
import ProxyBackend

/// The Bluetooth proxy's port (``ProxyBLE``) on BlueZ's central: the calls ``ProxyBackend``'s
/// jobs make, with BlueZ's errors as ESPHome reports them. A connect uses a link up already (the
/// gateway's) as it is — `connect()` would turn off its automatic reconnection — and otherwise
/// connects with no automatic reconnection (the client decides), 20 s at most; the handles are
/// the ones in BlueZ's object paths (`serviceXXXX/charYYYY/descZZZZ`), and the MTU is the write
/// length of the characteristics plus 3 (23 without one). Pairing is LE Just Works: gattway
/// registers no agent, so bluetoothd pairs as NoInputNoOutput, 20 s at most.
struct ProxyBLECentral: ProxyBLE {
    let central: CentralManager

    func isKnown(_ address: BluetoothAddress) -> Bool { central.assumeLoopIsolated { $0.isKnown(address) } }

    func isConnected(_ address: BluetoothAddress) -> Bool {
        central.assumeLoopIsolated { $0.peripheral(address).isConnected }
    }

    func linkEvents(_ lost: @escaping @Sendable (BluetoothAddress) -> Void) async -> ConnectionEventsToken {
        await central.connectionEvents { event in
            guard case .disconnected(let peripheral, _) = event else { return }
            lost(peripheral.address)
        }
    }

    func stopLinkEvents(_ events: ConnectionEventsToken) async { await central.stopConnectionEvents(events) }

    func connect(_ address: BluetoothAddress) async throws(ProxyFailure) -> ProxyGATT<Characteristic, Descriptor> {
        do {
            let adopted = await central.connectedPeripherals().contains { $0.address == address }
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
            throw Self.failure(error, connecting: true)
        }
    }

    func disconnect(_ address: BluetoothAddress) async {
        try? await central.disconnect(central.peripheral(address))
    }

    func read(_ characteristic: Characteristic) async throws(ProxyFailure) -> [UInt8] {
        do { return try await central.readValue(for: characteristic) } catch { throw Self.failure(error) }
    }

    func read(_ descriptor: Descriptor) async throws(ProxyFailure) -> [UInt8] {
        do { return try await central.readValue(for: descriptor) } catch { throw Self.failure(error) }
    }

    func write(_ data: [UInt8], to characteristic: Characteristic, withResponse: Bool) async throws(ProxyFailure) {
        do {
            try await central.writeValue(
                data, for: characteristic, type: withResponse ? .withResponse : .withoutResponse)
        } catch {
            throw Self.failure(error)
        }
    }

    func write(_ data: [UInt8], to descriptor: Descriptor) async throws(ProxyFailure) {
        do { try await central.writeValue(data, for: descriptor) } catch { throw Self.failure(error) }
    }

    func notifications(of characteristic: Characteristic, _ deliver: @escaping @Sendable ([UInt8]) -> Void)
        async throws(ProxyFailure) -> NotificationToken
    {
        do {
            return try await central.notifications(for: characteristic) { delivery in
                // On the loop thread, as each value arrives.
                guard case .value(let data) = delivery else { return }
                deliver(data)
            }
        } catch {
            throw Self.failure(error)
        }
    }

    func endNotifications(_ subscription: NotificationToken) {
        central.assumeLoopIsolated { $0.endNotifications(subscription) }
    }

    func pair(_ address: BluetoothAddress) async throws(ProxyFailure) {
        do {
            try await central.pair(await central.peripheral(address), timeout: .seconds(20))
        } catch {
            throw Self.pairingFailure(error)
        }
    }

    func isPaired(_ address: BluetoothAddress) async throws(ProxyFailure) -> Bool {
        do { return try await central.isPaired(await central.peripheral(address)) } catch {
            throw .connectionFailed
        }
    }

    func removeDevice(_ address: BluetoothAddress) async throws(ProxyFailure) {
        do { try await central.removeDevice(await central.peripheral(address)) } catch { throw .connectionFailed }
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
