import Bluetooth
import BluetoothManagement

/// What the management protocol tells about one simulated controller (the kernel's view of an
/// adapter: no bluetoothd state beyond what it set through the kernel).
struct ManagementControllerState: Equatable {
    /// The N of `hciN`.
    var index: UInt16
    var address: BluetoothAddress
    /// The adapter exists for the kernel (plugged in).
    var present: Bool
    var powered: Bool
    /// An LE discovery runs (bluetoothd started one for its clients).
    var discovering: Bool
    /// The controller's local name (bluetoothd sets it to the adapter's alias).
    var name: String

    /// Current Settings: powered (bit 0) as the adapter is; bondable (4) and LE (9) always, as
    /// bluetoothd sets them on an LE-only controller.
    var settings: UInt32 {
        var settings = ControllerInfo.Setting.bondable | ControllerInfo.Setting.lowEnergy
        if powered { settings |= ControllerInfo.Setting.powered }
        return settings
    }
}

/// The management commands the simulator answers and the events it sends, as the Linux kernel
/// does for its controllers (BlueZ's doc/mgmt-api.txt; kernel 6.1's answers where they vary).
/// Pure: a command and the controllers in, the reply out (unit-tested without a socket).
enum ManagementProtocol {
    /// Read Management Version Information: what kernel 6.1 reports.
    static let version: UInt8 = 1
    static let revision: UInt16 = 22
    /// The simulated controllers' HCI version (Bluetooth 5.0) and manufacturer (Linux
    /// Foundation, as the kernel's virtual controllers report).
    static let hciVersion: UInt8 = 0x09
    static let manufacturer: UInt16 = 0x05F1

    typealias Setting = ControllerInfo.Setting
    /// Supported Settings of a simulated (LE-only) controller.
    static let supportedSettings: UInt32 =
        Setting.powered | Setting.connectable | Setting.discoverable | Setting.bondable | Setting.lowEnergy
        | Setting.advertising

    /// Advertisement monitors per controller at most (kernel 6.1's HCI_MAX_ADV_MONITOR_NUM_HANDLES).
    static let maximumMonitors = 32

    /// What kernel 6.1 asks a device for when nothing was loaded for it: the controller's
    /// defaults (hdev->le_conn_min_interval … : 30–50 ms, latency 0, 420 ms).
    static let defaultConnectionParameters = ConnectionParameters(
        minInterval: 0x0018, maxInterval: 0x0028, latency: 0, supervisionTimeout: 0x002A)

    /// Kernel 6.1's check of an entry of Load Connection Parameters (hci_check_conn_params):
    /// interval 6–3200 with min ≤ max, timeout 10–3200 and above max / 8, latency at most 499
    /// and at most timeout · 4 / max − 1 (so a timeout of exactly (1 + latency) · max · 2 passes,
    /// which the Core spec's strict "larger than" would not).
    static func kernelAccepts(_ parameters: ConnectionParameters) -> Bool {
        let minimum = Int(parameters.minInterval)
        let maximum = Int(parameters.maxInterval)
        let timeout = Int(parameters.supervisionTimeout)
        let latency = Int(parameters.latency)
        guard minimum <= maximum, minimum >= 6, maximum <= 3200 else { return false }
        guard timeout >= 10, timeout <= 3200, maximum < timeout * 8 else { return false }
        return latency <= 499 && latency <= timeout * 4 / maximum - 1
    }

    /// Address Type of Discovering and Device Found: LE public and LE random (bits 1 and 2).
    static let leAddressTypes = ManagementCommand.DiscoveryType.lowEnergy

    /// The reply to one command packet from a client, given the controllers as they are now.
    /// A command that needs a controller but names none (or one that does not exist) → Invalid
    /// Index; one that needs none but names one → Invalid Index (the kernel's rule); a wrong
    /// parameter length → Invalid Parameters; any other code → Unknown Command.
    static func answer(_ command: ManagementPacket, controllers: [ManagementControllerState]) -> ManagementPacket {
        let present = controllers.filter(\.present)
        typealias Code = ManagementCommand.Code
        typealias Status = ManagementCommand.Status
        func complete(_ parameters: [UInt8]) -> ManagementPacket {
            ManagementEvent.commandComplete(
                opcode: command.code, status: Status.success, controller: command.controller, parameters: parameters
            ).packet
        }
        func status(_ status: UInt8) -> ManagementPacket {
            ManagementEvent.commandStatus(opcode: command.code, status: status, controller: command.controller).packet
        }
        switch command.code {
        case Code.readVersion, Code.readControllerIndexList:
            guard command.controller == ManagementPacket.noController else { return status(Status.invalidIndex) }
            guard command.parameters.isEmpty else { return status(Status.invalidParameters) }
            if command.code == Code.readVersion {
                return complete(ManagementVersion(version: version, revision: revision).parameters)
            }
            return complete(ManagementCommand.encodeIndexList(present.map(\.index).sorted()))
        case Code.readControllerInfo:
            guard let controller = present.first(where: { $0.index == command.controller }) else {
                return status(Status.invalidIndex)
            }
            guard command.parameters.isEmpty else { return status(Status.invalidParameters) }
            return complete(info(controller).parameters)
        default:
            return status(Status.unknownCommand)
        }
    }

    static func info(_ controller: ManagementControllerState) -> ControllerInfo {
        ControllerInfo(
            address: controller.address, bluetoothVersion: hciVersion, manufacturer: manufacturer,
            supportedSettings: supportedSettings, currentSettings: controller.settings, classOfDevice: 0,
            name: controller.name, shortName: "")
    }

    /// The events that take a client from `old` to `new` (one controller or none on each side):
    /// Index Added/Removed, then Discovering off before New Settings (a power-off stops the scan
    /// first), Discovering on after it.
    static func events(from old: ManagementControllerState?, to new: ManagementControllerState?) -> [ManagementPacket] {
        let wasPresent = old?.present ?? false
        let isPresent = new?.present ?? false
        switch (wasPresent, isPresent) {
        case (false, false):
            return []
        case (true, false):
            guard let old else { return [] }
            var events: [ManagementPacket] = []
            if old.discovering { events.append(discovering(false, index: old.index)) }
            events.append(ManagementEvent.indexRemoved(controller: old.index).packet)
            return events
        case (false, true):
            guard let new else { return [] }
            var events = [ManagementEvent.indexAdded(controller: new.index).packet]
            if new.discovering { events.append(discovering(true, index: new.index)) }
            return events
        case (true, true):
            guard let old, let new else { return [] }
            var events: [ManagementPacket] = []
            if old.discovering && !new.discovering { events.append(discovering(false, index: new.index)) }
            if old.settings != new.settings {
                events.append(ManagementEvent.newSettings(controller: new.index, settings: new.settings).packet)
            }
            if !old.discovering && new.discovering { events.append(discovering(true, index: new.index)) }
            return events
        }
    }

    static func discovering(_ on: Bool, index: UInt16) -> ManagementPacket {
        ManagementEvent.discovering(controller: index, addressType: leAddressTypes, discovering: on).packet
    }
}
