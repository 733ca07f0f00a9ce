import BlueZ
import Bluetooth
import EventLoop
import JSON

#if canImport(Glibc)
    import Glibc
#endif

/// What the ad-hoc BLE commands (`scan`, `inspect`, `read`, `write`, `notify`) share: a loop, a
/// central manager on the system bus that is powered on, and finding + connecting a peripheral.
struct CentralSession {
    let loop: EventLoop
    let central: CentralManager

    /// The `--adapter` and `--timeout` options every BLE command takes.
    static let options: [Option] = [
        .value("adapter", "NAME|ADDRESS", "Bluetooth adapter (hci0 or its address).", default: "first powered adapter"),
        .value(
            "timeout", "DURATION", "How long to wait for the adapter, the device and the connection.", default: "30s"),
    ]

    /// Starts the central and waits for `.poweredOn`.
    static func start(adapter: String?, timeout: Double) async throws -> CentralSession {
        let (loop, central) = try await startPoweredOn(loopName: "gattway-central", timeout: min(timeout, 10)) { loop in
            try await CentralManager.start(options: CentralOptions(adapter: AdapterSelector(adapter)), on: loop)
        }
        return CentralSession(loop: loop, central: central)
    }

    func close() async {
        await central.close()
        loop.shutdown()
    }

    /// Connects (without automatic reconnection), scanning meanwhile so BlueZ learns about a
    /// device it has not seen yet.
    func connect(_ address: BluetoothAddress, timeout: Double) async throws -> Peripheral {
        let scan = try await central.scan()
        defer { withExtendedLifetime(scan) {} }
        do {
            return try await central.connect(
                Peripheral(address: address), timeout: .nanoseconds(Int64(saturating: timeout * 1e9)),
                autoReconnect: false)
        } catch {
            throw CLIError.failure("\(error)")
        }
    }

    /// Finds a characteristic named `UUID` or `SERVICE/UUID` on a connected peripheral.
    func characteristic(_ spec: String, on peripheral: Peripheral) async throws -> Characteristic {
        let parts = spec.split(separator: "/").map(String.init)
        guard (1...2).contains(parts.count), let uuid = BluetoothUUID(parts[parts.count - 1]),
            parts.count == 1 || BluetoothUUID(parts[0]) != nil
        else {
            throw CLIError.usage("\"\(spec)\" is not a characteristic UUID (e.g. 2A19 or 180F/2A19)")
        }
        let serviceUUID = parts.count == 2 ? BluetoothUUID(parts[0]) : nil
        let services = try await central.discoverServices(serviceUUID.map { [$0] }, for: peripheral)
        for service in services {
            if let found = try await central.discoverCharacteristics([uuid], for: service).first { return found }
        }
        throw CLIError.failure("\(peripheral.address) has no characteristic \(spec)")
    }

    static func address(_ text: String?) throws -> BluetoothAddress {
        guard let text, let address = BluetoothAddress(text) else {
            throw CLIError.usage(
                "\"\(text ?? "")\" is not a Bluetooth address (expected six hex octets, e.g. A4:C1:38:0B:12:34)")
        }
        return address
    }

    static func timeout(_ arguments: ParsedArguments) throws -> Double {
        try arguments.duration("timeout") ?? 30
    }
}

/// True when standard output is a terminal.
var standardOutputIsTerminal: Bool { isatty(1) == 1 }

extension CentralSession {
    /// Starts a session, connects to `address`, runs `body`, disconnects and closes — also when
    /// `body` throws (a ``CentralError`` becomes a runtime failure, exit 1).
    static func withConnection(
        _ address: BluetoothAddress, adapter: String?, timeout: Double,
        _ body: (CentralSession, Peripheral) async throws -> Void
    ) async throws {
        let session = try await start(adapter: adapter, timeout: timeout)
        do {
            let peripheral = try await session.connect(address, timeout: timeout)
            do {
                try await body(session, peripheral)
            } catch {
                try? await session.central.disconnect(peripheral)
                throw error
            }
            try? await session.central.disconnect(peripheral)
        } catch let error as CLIError {
            await session.close()
            throw error
        } catch {
            await session.close()
            throw CLIError.failure("\(error)")
        }
        await session.close()
    }
}
