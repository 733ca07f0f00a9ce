import Bluetooth
import DBus
import Testing

@testable import BlueZSimulator

@Suite("Simulator model: GATT layout, discovery sessions, filter parsing, ATT errors, advertising schedule")
struct SimulatorModelTests {
    @Test("handles: GAP 1..5 hidden, GATT 6 with CCCD 9, then services with declaration, value, CCCD, descriptors")
    func layout() {
        let layout = GATTLayout(
            [
                ServiceSpec(
                    uuid: BluetoothUUID(0x180F),
                    characteristics: [
                        CharacteristicSpec(
                            uuid: BluetoothUUID(0x2A19), flags: ["read", "notify"],
                            descriptors: [DescriptorSpec(uuid: BluetoothUUID(0x2901), value: [])]),
                        CharacteristicSpec(uuid: BluetoothUUID(0x2A1A), flags: ["read"]),
                    ])
            ], name: "x")
        #expect(layout.services.map(\.handle) == [1, 6, 10])
        #expect(layout.services.map(\.exported) == [false, true, true])
        #expect(layout.services[1].characteristics[0].descriptors.map(\.handle) == [9])
        let battery = layout.services[2].characteristics
        #expect(battery.map(\.handle) == [11, 15] && battery[0].valueHandle == 12)
        #expect(battery[0].descriptors.map(\.uuid) == [GATTLayout.cccd, BluetoothUUID(0x2901)])
        #expect(GATTLayout.element("char", 11) == "char000b")
    }

    @Test("sessions: per client, InProgress twice, Failed from a stranger, filter kept after stop, cleared on leave")
    func sessions() throws {
        var sessions = DiscoverySessions()
        var filter = DiscoveryFilter()
        filter.uuids = [BluetoothUUID(0x180F)]
        sessions.setFilter(filter, for: ":1.1")
        #expect(try sessions.start(":1.1"))
        #expect(throws: BlueZError.busy) { _ = try sessions.start(":1.1") }
        #expect(throws: BlueZError.failed("No discovery started")) { _ = try sessions.stop(":1.2") }
        #expect(sessions.merged.isFiltered)
        #expect(try !sessions.start(":1.2"))
        #expect(!sessions.merged.isFiltered, "an unfiltered client widens the scan")
        #expect(sessions.remove(":1.2") == false)
        #expect(try sessions.stop(":1.1"))
        #expect(sessions.filters[":1.1"] == filter, "the filter survives StopDiscovery")
    }

    @Test("SetDiscoveryFilter parsing follows bluetoothd's checks")
    func filterParsing() throws {
        func entries(_ pairs: [(String, DBusValue)]) -> [DBusDictionaryEntry] {
            pairs.map { DBusDictionaryEntry(.string($0.0), .variant($0.1)) }
        }
        #expect(try DiscoveryFilter.parse([]) == nil)
        let parsed = try DiscoveryFilter.parse(
            entries([("UUIDs", .strings(["180d"])), ("Transport", "le"), ("DuplicateData", true)]))
        #expect(parsed?.uuids == [BluetoothUUID(0x180D)] && parsed?.transport == .le && parsed?.duplicateData == true)
        for bad in [
            [("RSSI", DBusValue.int16(21))], [("Pathloss", .uint16(138))], [("Transport", "usb")],
            [("RSSI", .int32(-60))],
            [("RSSI", .int16(-60)), ("Pathloss", .uint16(10))], [("Nope", true)],
        ] {
            #expect(throws: BlueZError.invalidArguments) { _ = try DiscoveryFilter.parse(entries(bad)) }
        }
    }

    @Test(
        "ATT error codes map to BlueZ's D-Bus errors",
        arguments: [
            (UInt8(0x02), "org.bluez.Error.NotPermitted", "Read not permitted"),
            (0x03, "org.bluez.Error.NotPermitted", "Write not permitted"),
            (0x05, "org.bluez.Error.NotPermitted", "Not paired"),
            (0x07, "org.bluez.Error.InvalidArguments", "Invalid offset"),
            (0x0D, "org.bluez.Error.InvalidArguments", "Invalid Length"),
            (0x08, "org.bluez.Error.NotAuthorized", "Operation Not Authorized"),
            (0x06, "org.bluez.Error.NotSupported", "Operation is not supported"),
            (0x00, "org.bluez.Error.Failed", "Operation failed"),
            (0x80, "org.bluez.Error.Failed", "Operation failed with ATT error: 0x80"),
            (0xFD, "org.bluez.Error.Failed", "Operation failed with ATT error: 0xfd"),
        ])
    func att(code: UInt8, name: String, message: String) {
        #expect(BlueZError.att(code) == DBusError(DBusError.Name(name), message))
    }
}
