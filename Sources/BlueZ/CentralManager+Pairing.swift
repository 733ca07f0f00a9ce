import Bluetooth
import DBus

extension CentralManager {
    /// Whether BlueZ has the peripheral paired (`Device1.Paired`, asked of bluetoothd: the object
    /// tree does not keep it). False for a device BlueZ does not know.
    public func isPaired(_ peripheral: Peripheral) async throws -> Bool {
        let address = peripheral.address
        let operation = "org.bluez.Device1.Paired \(address)"
        try requirePoweredOn(operation)
        guard let path = devicePath(address), tree.device(path) != nil else { return false }
        do {
            let reply = try await callBlueZ(
                path, "org.freedesktop.DBus.Properties", "Get", [.string(BlueZObjectTree.device), .string("Paired")],
                timeout: .seconds(5))
            return reply.first?.bool == true
        } catch {
            let failure = CentralError.wrap(error, operation: operation)
            if failure.code == .unknownDevice { return false }
            throw failure
        }
    }

    /// Pairs with a peripheral (`Device1.Pair`) and returns once BlueZ says it is paired; one
    /// paired already (`AlreadyExists`) succeeds at once. With the manager's pairing agent
    /// started (``startPairingAgent(_:)``) bluetoothd pairs as KeyboardDisplay and asks the agent
    /// for a passkey or a confirmation when the peripheral wants one; without it, as
    /// NoInputNoOutput: LE Just Works, and a peripheral that insists on a passkey or numeric
    /// comparison refuses. The peripheral should be connected (bluetoothd connects
    /// one that is not, when it can).
    /// - Parameter timeout: the whole pairing; when it passes BlueZ's pairing is cancelled
    ///   (`CancelPairing`) and ``CentralError/Code/connectionTimeout`` is thrown.
    /// - Throws: ``CentralError`` carrying BlueZ's error, e.g. `org.bluez.Error.AuthenticationFailed`,
    ///   `AuthenticationRejected`, `AuthenticationCanceled` (also when the link dropped),
    ///   `ConnectionAttemptFailed`, `InProgress`.
    public func pair(_ peripheral: Peripheral, timeout: Duration = .seconds(30)) async throws {
        let address = peripheral.address
        let operation = "org.bluez.Device1.Pair \(address)"
        try requirePoweredOn(operation)
        guard let path = devicePath(address), tree.device(path) != nil else {
            throw CentralError(.unknownDevice, operation: operation, message: "BlueZ does not know the device")
        }
        agent.pairingNow[address, default: 0] += 1
        defer {
            agent.pairingNow[address, default: 1] -= 1
            if agent.pairingNow[address] == 0 { agent.pairingNow.removeValue(forKey: address) }
        }
        do {
            // A pairing cancelled: BlueZ answers the Pair with AuthenticationCanceled. The device
            // is watched meanwhile (a link Pair brings up is seen, and stays watched while up).
            try await whileWatched(address) {
                try await callDevice(
                    path, "Pair", within: timeout, cancel: "CancelPairing",
                    timeout: CentralError(
                        .connectionTimeout, operation: operation, message: "pairing did not finish within \(timeout)"))
            }
        } catch {
            let failure = CentralError.wrap(error, operation: operation)
            if failure.bluezName == "org.bluez.Error.AlreadyExists" { return }
            throw failure
        }
    }

    /// Makes BlueZ forget a peripheral (`Adapter1.RemoveDevice`): its pairing (keys, bond), its
    /// GATT cache and its object; a connected one is disconnected first (reported as a
    /// disconnection that was asked for). The device comes back as a new one when a scan sees
    /// it again. A device BlueZ does not know succeeds at once.
    public func removeDevice(_ peripheral: Peripheral) async throws {
        let address = peripheral.address
        let operation = "org.bluez.Adapter1.RemoveDevice \(address)"
        try requirePoweredOn(operation)
        guard let adapterPath, let path = devicePath(address), let device = tree.device(path) else { return }
        let connected = device.isConnected
        if connected { disconnectsRequested.insert(address) }
        do {
            _ = try await callBlueZ(
                adapterPath, BlueZObjectTree.adapter, "RemoveDevice", [.objectPath(path)], timeout: .seconds(15))
        } catch {
            let failure = CentralError.wrap(error, operation: operation)
            if failure.code == .unknownDevice { return }
            if connected { disconnectsRequested.remove(address) }
            throw failure
        }
    }
}
