import BlueZ
import Bluetooth
import Gateway
import JSON

/// The gateway's ``BLEPort`` over the BlueZ ``CentralManager``.
///
/// The gateway owns reconnection (its connection scheduler bounds concurrent connects and
/// queues them fairly), so every connect here asks the central *not* to reconnect on its own.
struct CentralBLEPort: BLEPort {
    let central: CentralManager

    /// Notifications of one characteristic that may wait for the gateway before the central
    /// stops reading its AcquireNotify socket (flow control: nothing is dropped; the backlog
    /// waits in the kernel and with the sender until the gateway has taken half).
    static let notificationHighWater = 4_096

    func scan(services: [BluetoothUUID]) async throws(BLEPortError) -> AsyncStream<BLEDiscovery> {
        let results: AsyncStream<ScanResult>
        do {
            results = try await central.scan(ScanOptions(services: services.isEmpty ? nil : services, allowDuplicates: true))
        } catch {
            throw Self.portError(error)
        }
        return AsyncStream(bufferingPolicy: .bufferingNewest(4096)) { continuation in
            let task = Task {
                for await result in results {
                    continuation.yield(BLEDiscovery(address: result.peripheral.address, advertisement: result.advertisementData))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    func connect(_ address: BluetoothAddress, timeout: Double) async throws(BLEPortError) {
        do {
            let peripheral = await central.peripheral(address)
            let limit = Duration.milliseconds(Int64(saturating: timeout * 1000))
            try await central.connect(peripheral, timeout: limit, autoReconnect: false)
            _ = try await central.discoverServices(nil, for: peripheral)
        } catch {
            throw Self.portError(error)
        }
    }

    func disconnect(_ address: BluetoothAddress) async {
        try? await central.disconnect(await central.peripheral(address))
    }

    func discover(_ address: BluetoothAddress, services: [BluetoothUUID]?) async throws(BLEPortError) -> [BLECharacteristic] {
        do {
            var found: [BLECharacteristic] = []
            for service in try await central.discoverServices(services, for: await central.peripheral(address)) {
                for characteristic in try await central.discoverCharacteristics(nil, for: service) {
                    found.append(BLECharacteristic(service: service.uuid, uuid: characteristic.uuid, properties: characteristic.properties))
                }
            }
            return found
        } catch {
            throw Self.portError(error)
        }
    }

    func notifications(_ address: BluetoothAddress, characteristic: BLECharacteristic) async throws(BLEPortError)
        -> AsyncStream<[UInt8]>
    {
        let values: NotificationValues
        do {
            values = try await central.notifications(
                for: try await resolve(address, characteristic), pausingAbove: Self.notificationHighWater)
        } catch let error as BLEPortError {
            throw error
        } catch {
            throw Self.portError(error)
        }
        // One hand-off: the gateway's iteration pulls straight from the central's bounded
        // channel (no relay task, no second buffer); an error ends the stream.
        let source = NotificationSource(values.makeAsyncIterator())
        return AsyncStream(unfolding: { await source.next() })
    }

    func read(_ address: BluetoothAddress, characteristic: BLECharacteristic) async throws(BLEPortError) -> [UInt8] {
        do {
            return try await central.readValue(for: try await resolve(address, characteristic))
        } catch let error as BLEPortError {
            throw error
        } catch {
            throw Self.portError(error)
        }
    }

    func write(_ address: BluetoothAddress, characteristic: BLECharacteristic, value: [UInt8], withResponse: Bool)
        async throws(BLEPortError)
    {
        do {
            try await central.writeValue(
                value, for: try await resolve(address, characteristic), type: withResponse ? .withResponse : .withoutResponse)
        } catch let error as BLEPortError {
            throw error
        } catch {
            throw Self.portError(error)
        }
    }

    func connectionEvents() -> AsyncStream<BLEConnectionEvent> {
        AsyncStream(bufferingPolicy: .unbounded) { continuation in
            let task = Task {
                for await event in await central.connectionEvents() {
                    switch event {
                    case .disconnected(let peripheral, let error):
                        continuation.yield(.disconnected(peripheral.address, reason: error.map(Self.portError)))
                    case .connected(let peripheral):
                        // Reported late (a busy loop), the link may be down again: that was reported as well.
                        guard await central.peripheral(peripheral.address).isConnected else { continue }
                        let known = await central.rememberedAdvertisementData(peripheral.address)
                        continuation.yield(.connected(BLEDiscovery(address: peripheral.address, advertisement: known)))
                    case .failedToConnect:
                        break  // the connect call that failed reports it
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The D-Bus round trip of the central's last Peer.Ping to bluetoothd, in seconds.
    func lastRoundTripLatency() -> Double? {
        central.lastRoundTrip.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
    }

    /// The central's characteristic for the gateway's (service, uuid) pair.
    private func resolve(_ address: BluetoothAddress, _ wanted: BLECharacteristic) async throws -> Characteristic {
        let peripheral = await central.peripheral(address)
        for service in try await central.discoverServices([wanted.service], for: peripheral) {
            if let match = try await central.discoverCharacteristics([wanted.uuid], for: service).first { return match }
        }
        throw BLEPortError(.notFound, "\(address) has no characteristic \(wanted)")
    }

    /// The central's error in the gateway's terms (the kinds share Core Bluetooth's meanings).
    static func portError(_ error: any Error) -> BLEPortError {
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
        return BLEPortError(kind, central.description)
    }
}

/// The iterator of a ``NotificationValues`` behind `AsyncStream(unfolding:)`, which calls it
/// from one consumer task at a time.
private final class NotificationSource: @unchecked Sendable {
    private var iterator: NotificationValues.AsyncIterator
    private var ended = false

    init(_ iterator: NotificationValues.AsyncIterator) { self.iterator = iterator }

    func next() async -> [UInt8]? {
        guard !ended else { return nil }
        do {
            if let value = try await iterator.next() { return value }
        } catch {}
        ended = true
        return nil
    }
}
