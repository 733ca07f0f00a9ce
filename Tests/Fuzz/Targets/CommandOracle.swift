import Bluetooth
import Gateway
import Synchronization

/// What a config lets the gateway do over GATT, for ``FuzzTargets/mqttCommands``: which rules may
/// govern an address (a rule that names it alone, or one whose match held for something the
/// input let it advertise or report connected), and, for each GATT operation the gateway asks
/// the port for, whether one of those rules names that characteristic for it — `commands` for
/// writes, `subscribe`/`poll` for reads, anything with `raw_gatt: true`. Used from the driver and
/// from the gateway's loop thread, one after the other (the driver waits for the loop to
/// settle); the lock keeps that honest.
final class CommandOracle: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `seen`, `reads` and `writes` are read and written with
    // `lock` held.
    private let lock = Mutex(())
    let config: GatewayConfig
    /// Everything each address advertised or was reported connected with.
    private var seen: [BluetoothAddress: [AdvertisementData]] = [:]
    /// GATT operations checked so far.
    private(set) var reads = 0
    private(set) var writes = 0

    init(config: GatewayConfig) { self.config = config }

    func saw(_ address: BluetoothAddress, _ advertisement: AdvertisementData) {
        lock.withLock { _ in seen[address, default: []].append(advertisement) }
    }

    /// The rules the gateway may have given the device at `address`.
    func rules(for address: BluetoothAddress) -> [DeviceRule] {
        let seen = lock.withLock { _ in self.seen[address] ?? [] }
        return config.devices.filter { rule in
            if rule.match.addresses == [address] { return true }
            return seen.contains { rule.match.matches(address, $0) }
        }
    }

    func check(_ operation: CheckedBLE.Operation, _ address: BluetoothAddress, _ characteristic: BLECharacteristic) {
        let rules = rules(for: address)
        fuzzProperty(
            !rules.isEmpty, "\(operation) of \(characteristic) on \(address), which no device rule names or matched")
        let named = rules.contains { rule in
            if rule.rawGATT { return true }
            switch operation {
            case .write:
                return rule.commands.contains { Self.names($0.service, $0.characteristic, characteristic) }
            case .read:
                return (rule.subscribe + rule.poll).contains {
                    Self.names($0.service, $0.characteristic, characteristic)
                }
            }
        }
        fuzzProperty(
            named,
            "\(operation) of \(characteristic) on \(address): no rule for the device names it (nor allows raw GATT)")
        lock.withLock { _ in
            switch operation {
            case .read: reads += 1
            case .write: writes += 1
            }
        }
    }

    /// A config entry (service optional) names the characteristic.
    static func names(_ service: BluetoothUUID?, _ uuid: BluetoothUUID, _ characteristic: BLECharacteristic) -> Bool {
        characteristic.uuid == uuid && (service == nil || service == characteristic.service)
    }
}
