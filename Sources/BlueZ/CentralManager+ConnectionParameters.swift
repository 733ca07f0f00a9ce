import Bluetooth
import BluetoothManagement

extension CentralManager {
    /// Makes the kernel use `parameters` when this central next connects to `address`: Load
    /// Connection Parameters on the kernel's management socket the central reads its reports
    /// from (``KernelRadio/loadConnectionParameters(_:controller:)``; docs/bluez.md §7.2). bluetoothd's
    /// `Device1.Connect` has the kernel make the link, so a connect after this uses them; a link
    /// that is up now keeps its own (Linux 6.1 does not update it).
    ///
    /// Fails with `operationNotSupported` when the central does not read the management socket
    /// (`bluetooth.radio` is `dbus`, or the process lacks `CAP_NET_ADMIN`) or has no adapter yet,
    /// and with `failed` when the kernel refused the command.
    public func loadConnectionParameters(_ parameters: ConnectionParameters, for address: BluetoothAddress)
        async throws(CentralError)
    {
        let operation = "load the connection parameters of \(address)"
        guard let radio = passiveScanner, let controller = adapterIndex else {
            throw CentralError(
                .operationNotSupported, operation: operation,
                message: "the kernel's management socket is not in use (bluetooth.radio)")
        }
        let type: ManagementAddressType = peripheral(address).addressType == .random ? .leRandom : .lePublic
        do {
            try await radio.loadConnectionParameters(
                ConnectionParameterEntry(address: address, addressType: type, parameters: parameters),
                controller: controller)
        } catch {
            throw CentralError(.failed, operation: operation, message: "\(error)")
        }
    }

    /// The parameters loaded for `address` on this central's controller (nil: none, or no
    /// management socket).
    public func loadedConnectionParameters(_ address: BluetoothAddress) async -> ConnectionParameters? {
        guard let radio = passiveScanner, let controller = adapterIndex else { return nil }
        return await radio.loadedConnectionParameters(address, controller: controller)
    }
}
