import Bluetooth
import DBus

/// A characteristic of a linked adapter's device: its GATT procedures become calls into the
/// application on the other side (bluetoothd 5.66's server, docs/simulator.md "Peripheral role").
extension SimulatedCharacteristic {
    /// A central's read of an application characteristic: ReadValue into the application.
    func forwardRead(
        to target: ApplicationObject, offset: UInt16, of device: SimulatedDevice,
        in simulator: isolated BlueZSimulator
    ) {
        guard has("read") else { return finishRead(.failure(BlueZError.att(0x02)), in: simulator) }
        guard let options = device.applicationOptions(offset: offset, in: simulator) else {
            return finishRead(.failure(BlueZError.failed("Not connected")), in: simulator)
        }
        simulator.callApplication(target, interface: BlueZSimulator.characteristicInterface, "ReadValue", [options]) {
            result in
            switch result {
            case .success(let values):
                self.finishRead(.success(Array((values.first?.bytes ?? []).prefix(512))), in: simulator)
            case .failure(let error):
                self.finishRead(.failure(BlueZError.att(attError(fromApplication: error, write: false))), in: simulator)
            }
        }
    }

    /// A central's write of an application characteristic. A command is not acknowledged; a
    /// request to a characteristic with write-without-response is acknowledged at once (bluetoothd
    /// ignores the application's answer); otherwise the application's answer is the reply.
    func forwardWrite(
        _ bytes: [UInt8], to target: ApplicationObject, offset: UInt16, reply: DBusPendingReply?,
        of device: SimulatedDevice, in simulator: isolated BlueZSimulator
    ) {
        guard let options = device.applicationOptions(offset: offset, in: simulator) else {
            reply?.fail(BlueZError.failed("Not connected"))
            return
        }
        simulator.counters.writes += 1
        let arguments: [DBusValue] = [.bytes(bytes), options]
        let interface = BlueZSimulator.characteristicInterface
        guard let reply, !target.flags.contains("write-without-response") else {
            reply?.succeed()
            simulator.callApplication(target, interface: interface, "WriteValue", arguments)
            return
        }
        writePending = true
        simulator.callApplication(target, interface: interface, "WriteValue", arguments) { result in
            self.writePending = false
            switch result {
            case .success(let values) where values.isEmpty: reply.succeed()
            case .success: reply.fail(BlueZError.att(0x06))
            case .failure(let error): reply.fail(BlueZError.att(attError(fromApplication: error, write: true)))
            }
        }
    }

    /// A central's read or write (nil `bytes`: read) of a descriptor answered by an application descriptor.
    func forwardDescriptor(
        at path: DBusObjectPath, to target: ApplicationObject, write bytes: [UInt8]?, offset: UInt16,
        reply: DBusPendingReply, of device: SimulatedDevice, in simulator: isolated BlueZSimulator
    ) {
        guard let options = device.applicationOptions(offset: offset, in: simulator) else {
            return reply.fail(BlueZError.failed("Not connected"))
        }
        let method = bytes == nil ? "ReadValue" : "WriteValue"
        let arguments = bytes.map { [DBusValue.bytes($0), options] } ?? [options]
        let interface = BlueZSimulator.descriptorInterface
        simulator.callApplication(target, interface: interface, method, arguments) { result in
            switch result {
            case .success(let values):
                if bytes == nil {
                    let value = values.first?.bytes ?? []
                    simulator.withBus { try $0.setProperties(["Value": .bytes(value)], interface: interface, at: path) }
                    reply.succeed([.bytes(value)])
                } else {
                    reply.succeed()
                }
            case .failure(let error):
                reply.fail(BlueZError.att(attError(fromApplication: error, write: bytes != nil)))
            }
        }
    }
}
