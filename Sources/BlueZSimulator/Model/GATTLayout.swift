import Bluetooth

/// Where a device's GATT attributes sit: handles allocated as a real peripheral lays them out
/// (GAP 0x1800 first, then GATT 0x1801 with Service Changed, then the scenario's services; per
/// characteristic a declaration handle, the value handle after it, then the CCCD for
/// notify/indicate and the other descriptors), and which of them bluetoothd exports.
public struct GATTLayout: Sendable, Equatable {
    public struct Service: Sendable, Equatable {
        public var uuid: BluetoothUUID
        /// The service declaration handle (`service%04x`).
        public var handle: UInt16
        public var characteristics: [Characteristic]
        /// False for services bluetoothd's plugins claim (GAP 0x1800, HID 0x1812, Scan Parameters 0x1813).
        public var exported: Bool
    }

    public struct Characteristic: Sendable, Equatable {
        public var spec: CharacteristicSpec
        /// The declaration handle (`char%04x`).
        public var handle: UInt16
        public var valueHandle: UInt16
        public var descriptors: [Descriptor]
    }

    public struct Descriptor: Sendable, Equatable {
        public var uuid: BluetoothUUID
        public var handle: UInt16
        public var value: [UInt8]
    }

    public var services: [Service]

    /// The CCCD UUID 0x2902.
    public static let cccd = BluetoothUUID(0x2902)
    static let hidden: Set<BluetoothUUID> = [BluetoothUUID(0x1800), BluetoothUUID(0x1812), BluetoothUUID(0x1813)]

    /// Lays out `specs`, adding GAP (device name `name`) and GATT services unless the scenario has them.
    public init(_ specs: [ServiceSpec], name: String?) {
        var all = specs
        let gatt = ServiceSpec(
            uuid: BluetoothUUID(0x1801),
            characteristics: [
                CharacteristicSpec(uuid: BluetoothUUID(0x2A05), flags: ["indicate"], value: .bytes([]))
            ])
        let gap = ServiceSpec(
            uuid: BluetoothUUID(0x1800),
            characteristics: [
                CharacteristicSpec(
                    uuid: BluetoothUUID(0x2A00), flags: ["read"], value: .bytes(Array((name ?? "").utf8))),
                CharacteristicSpec(uuid: BluetoothUUID(0x2A01), flags: ["read"], value: .bytes([0, 0])),
            ])
        if !specs.contains(where: { $0.uuid == gatt.uuid }) { all.insert(gatt, at: 0) }
        if !specs.contains(where: { $0.uuid == gap.uuid }) { all.insert(gap, at: 0) }
        var handle: UInt16 = 1
        services = all.map { spec in
            let serviceHandle = handle
            handle &+= 1
            let characteristics = spec.characteristics.map { characteristic -> Characteristic in
                let declaration = handle
                handle &+= 2
                var descriptors: [Descriptor] = []
                if characteristic.flags.contains("notify") || characteristic.flags.contains("indicate") {
                    descriptors.append(Descriptor(uuid: Self.cccd, handle: handle, value: [0, 0]))
                    handle &+= 1
                }
                for descriptor in characteristic.descriptors where descriptor.uuid != Self.cccd {
                    descriptors.append(Descriptor(uuid: descriptor.uuid, handle: handle, value: descriptor.value))
                    handle &+= 1
                }
                return Characteristic(
                    spec: characteristic, handle: declaration, valueHandle: declaration &+ 1, descriptors: descriptors)
            }
            return Service(
                uuid: spec.uuid, handle: serviceHandle, characteristics: characteristics,
                exported: !Self.hidden.contains(spec.uuid))
        }
    }

    /// The primary service UUIDs (what `Device1.UUIDs` lists once services are resolved), sorted as BlueZ sorts them.
    public var serviceUUIDs: [String] {
        Array(Set(services.map(\.uuid.description))).sorted()
    }

    /// `service%04x`, `char%04x`, `desc%04x` path elements.
    public static func element(_ kind: String, _ handle: UInt16) -> String {
        let hex = String(handle, radix: 16)
        return kind + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    /// bluetoothd's own local database (`btd_gatt_database_new`, 5.66): GAP (Device Name,
    /// Appearance), GATT (Service Changed, Client Supported Features, Database Hash, Server
    /// Supported Features) and Device Information (PnP ID) — handles 0x0001…0x0012. Applications'
    /// services follow (``nextFreeHandle``).
    public static func bluezLocal(name: String) -> GATTLayout {
        GATTLayout(
            [
                ServiceSpec(
                    uuid: BluetoothUUID(0x1800),
                    characteristics: [
                        CharacteristicSpec(
                            uuid: BluetoothUUID(0x2A00), flags: ["read"], value: .bytes(Array(name.utf8))),
                        CharacteristicSpec(uuid: BluetoothUUID(0x2A01), flags: ["read"], value: .bytes([0, 0])),
                    ]),
                ServiceSpec(
                    uuid: BluetoothUUID(0x1801),
                    characteristics: [
                        CharacteristicSpec(uuid: BluetoothUUID(0x2A05), flags: ["indicate"]),
                        CharacteristicSpec(uuid: BluetoothUUID(0x2B29), flags: ["read", "write"], value: .bytes([0])),
                        CharacteristicSpec(
                            uuid: BluetoothUUID(0x2B2A), flags: ["read"],
                            value: .bytes([UInt8](repeating: 0, count: 16))),
                        CharacteristicSpec(uuid: BluetoothUUID(0x2B3A), flags: ["read"], value: .bytes([1])),
                    ]),
                ServiceSpec(
                    uuid: BluetoothUUID(0x180A),
                    characteristics: [
                        CharacteristicSpec(
                            uuid: BluetoothUUID(0x2A50), flags: ["read"],
                            value: .bytes([0x02, 0x6B, 0x1D, 0x46, 0x02, 0x42, 0x05]))
                    ]),
            ], name: name)
    }

    /// The first handle after every attribute of the layout.
    public var nextFreeHandle: UInt16 {
        var last: UInt16 = 0
        for service in services {
            last = max(last, service.handle)
            for characteristic in service.characteristics {
                last = max(last, characteristic.valueHandle)
                for descriptor in characteristic.descriptors { last = max(last, descriptor.handle) }
            }
        }
        return last &+ 1
    }
}
