import BlueZSimulator
import DBus
import Foundation
import Testing

@Suite("Peripheral model: application errors to ATT, the links scenario key")
struct PeripheralModelTests {
    @Test("application errors become the ATT codes bluetoothd 5.66 sends")
    func applicationErrors() {
        func code(_ name: String, _ message: String = "", write: Bool = false) -> UInt8 {
            attError(fromApplication: DBusError(DBusError.Name(name), message), write: write)
        }
        #expect(code("org.bluez.Error.Failed", "0x80") == 0x80)
        #expect(code("org.bluez.Error.Failed", "0x9f") == 0x9F)
        #expect(code("org.bluez.Error.Failed", "0x42") == 0x0E)
        #expect(code("org.bluez.Error.Failed", "something broke") == 0x80)
        #expect(code("org.bluez.Error.NotSupported") == 0x06)
        #expect(code("org.bluez.Error.NotAuthorized") == 0x08)
        #expect(code("org.bluez.Error.InvalidValueLength") == 0x0D)
        #expect(code("org.bluez.Error.InvalidOffset") == 0x07)
        #expect(code("org.bluez.Error.InProgress") == 0xFE)
        #expect(code("org.bluez.Error.NotPermitted") == 0x02)
        #expect(code("org.bluez.Error.NotPermitted", write: true) == 0x03)
        #expect(code("org.freedesktop.DBus.Error.NoReply") == 0x0E)
        // …and the central's bluetoothd reports them as docs/bluez.md §2.2 says.
        #expect(BlueZError.att(0x80) == DBusError("org.bluez.Error.Failed", "Operation failed with ATT error: 0x80"))
        #expect(BlueZError.att(0x08) == DBusError("org.bluez.Error.NotAuthorized", "Operation Not Authorized"))
    }

    @Test("links: two known, different adapters; rssi and interval")
    func links() throws {
        let adapters =
            #""adapters": [{"name": "hci0", "address": "00:AA:01:00:00:00"}, {"name": "hci1", "address": "00:AA:01:00:00:01"}]"#
        let scenario = try Scenario.parse(
            Data(
                "{\(adapters), \"links\": [{\"adapters\": [\"hci0\", \"hci1\"], \"rssi\": -30, \"interval\": \"50ms\"}]}"
                    .utf8))
        #expect(scenario.links == [LinkSpec("hci0", "hci1", rssi: -30, interval: 0.05)])
        #expect(scenario.links.first?.peer(of: "hci1") == "hci0")
        #expect(throws: ScenarioError.self) {
            try Scenario.parse(Data("{\(adapters), \"links\": [{\"adapters\": [\"hci0\", \"hci2\"]}]}".utf8))
        }
        #expect(throws: ScenarioError.self) {
            try Scenario.parse(Data("{\(adapters), \"links\": [{\"adapters\": [\"hci0\", \"hci0\"]}]}".utf8))
        }
        #expect(throws: ScenarioError.self) {
            try Scenario.parse(
                Data("{\(adapters), \"links\": [{\"adapters\": [\"hci0\", \"hci1\"], \"range\": 3}]}".utf8))
        }
    }
}
