import Bluetooth
import BluetoothManagement
import Testing

@Suite("Management commands and their return parameters: byte-exact vectors")
struct ManagementCommandTests {
    @Test("the commands gattway sends encode as the kernel expects them")
    func commands() {
        #expect(ManagementCommand.readVersion().bytes == [0x01, 0x00, 0xFF, 0xFF, 0x00, 0x00])
        #expect(ManagementCommand.readControllerIndexList().bytes == [0x03, 0x00, 0xFF, 0xFF, 0x00, 0x00])
        #expect(ManagementCommand.readControllerInfo(controller: 1).bytes == [0x04, 0x00, 0x01, 0x00, 0x00, 0x00])
        #expect(ManagementCommand.startDiscovery(controller: 0).bytes == [0x23, 0x00, 0x00, 0x00, 0x01, 0x00, 0x06])
        #expect(
            ManagementCommand.stopDiscovery(controller: 2, addressTypes: 0x07).bytes == [
                0x24, 0x00, 0x02, 0x00, 0x01, 0x00, 0x07,
            ])
    }

    @Test("Load Connection Parameters: a count, then address, type and four values per device; decoded back")
    func loadConnectionParameters() throws {
        let entry = ConnectionParameterEntry(
            address: BluetoothAddress(rawValue: 0xA4C1_3800_0001), addressType: .leRandom,
            parameters: ConnectionParameters(minInterval: 6, maxInterval: 12, latency: 1, supervisionTimeout: 400))
        let packet = ManagementCommand.loadConnectionParameters(controller: 1, entries: [entry])
        #expect(
            packet.bytes == [
                0x35, 0x00, 0x01, 0x00, 0x11, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x38, 0xC1, 0xA4, 0x02, 0x06, 0x00,
                0x0C, 0x00, 0x01, 0x00, 0x90, 0x01,
            ])
        #expect(try ConnectionParameterEntry.decodeList(packet.parameters) == [entry])
        #expect(throws: ManagementDecodeError.self) {
            try ConnectionParameterEntry.decodeList(Array(packet.parameters.dropLast()))
        }
    }

    @Test("Read Management Version: version 1, revision 22; short parameters are an error")
    func version() throws {
        #expect(try ManagementVersion.decode([0x01, 0x16, 0x00]) == ManagementVersion(version: 1, revision: 22))
        #expect(ManagementVersion(version: 1, revision: 0x0116).parameters == [0x01, 0x16, 0x01])
        #expect(throws: ManagementDecodeError.shortReturnParameters(command: 0x0001, expected: 3, actual: 2)) {
            try ManagementVersion.decode([0x01, 0x16])
        }
    }

    @Test("Read Controller Index List: a count, then that many indexes")
    func indexList() throws {
        #expect(try ManagementCommand.decodeIndexList([0x02, 0x00, 0x00, 0x00, 0x01, 0x00]) == [0, 1])
        #expect(try ManagementCommand.decodeIndexList([0x00, 0x00]) == [])
        #expect(ManagementCommand.encodeIndexList([0, 0x0102]) == [0x02, 0x00, 0x00, 0x00, 0x02, 0x01])
        #expect(throws: ManagementDecodeError.shortReturnParameters(command: 0x0003, expected: 2, actual: 1)) {
            try ManagementCommand.decodeIndexList([0x01])
        }
        // A count the octets do not back is refused, not read past the end.
        #expect(throws: ManagementDecodeError.shortReturnParameters(command: 0x0003, expected: 131_072, actual: 4)) {
            try ManagementCommand.decodeIndexList([0xFF, 0xFF, 0x00, 0x00])
        }
    }

    /// Read Controller Information of hci0: 00:1A:7D:DA:71:13, Bluetooth 5.0 (0x09), Intel (2),
    /// powered, LE, BR/EDR; class 0x0C010C; name "gattway"; no short name.
    static let controllerInfo: [UInt8] = {
        var bytes: [UInt8] = [0x13, 0x71, 0xDA, 0x7D, 0x1A, 0x00, 0x09, 0x02, 0x00]
        bytes += [0xFF, 0xFE, 0x01, 0x00]  // supported settings 0x0001FEFF
        bytes += [0x81, 0x02, 0x00, 0x00]  // current: powered, BR/EDR, LE
        bytes += [0x0C, 0x01, 0x0C]
        bytes += Array("gattway".utf8) + [UInt8](repeating: 0, count: 249 - 7)
        bytes += [UInt8](repeating: 0, count: 11)
        return bytes
    }()

    @Test("Read Controller Information decodes its 280 octets and encodes back to them")
    func controllerInfo() throws {
        let info = ControllerInfo(
            address: BluetoothAddress("00:1A:7D:DA:71:13")!, bluetoothVersion: 9, manufacturer: 2,
            supportedSettings: 0x0001_FEFF,
            currentSettings: ControllerInfo.Setting.powered | ControllerInfo.Setting.bredr
                | ControllerInfo.Setting.lowEnergy,
            classOfDevice: 0x0C_010C, name: "gattway", shortName: "")
        #expect(Self.controllerInfo.count == ControllerInfo.length)
        #expect(try ControllerInfo.decode(Self.controllerInfo) == info)
        #expect(info.parameters == Self.controllerInfo)
        #expect(throws: ManagementDecodeError.shortReturnParameters(command: 0x0004, expected: 280, actual: 279)) {
            try ControllerInfo.decode(Array(Self.controllerInfo.dropLast()))
        }
    }

    @Test("names longer than their fields are cut on a character boundary, keeping the NUL")
    func longNames() throws {
        let info = ControllerInfo(
            address: BluetoothAddress(rawValue: 1), bluetoothVersion: 0, manufacturer: 0, supportedSettings: 0,
            currentSettings: 0, classOfDevice: 0, name: String(repeating: "é", count: 200), shortName: "ÅÅÅÅÅÅ")
        let parameters = info.parameters
        #expect(parameters.count == ControllerInfo.length)
        let decoded = try ControllerInfo.decode(parameters)
        #expect(decoded.name == String(repeating: "é", count: 124))  // 248 octets
        #expect(decoded.shortName == "ÅÅÅÅÅ")  // 10 octets
        #expect(parameters[20 + 248] == 0 && parameters[20 + 249 + 10] == 0)
    }

    @Test("Add Advertisement Patterns Monitor: a count, each pattern with its 31-octet value field")
    func addMonitor() throws {
        let command = ManagementCommand.addAdvertisementPatternsMonitor(
            controller: 4, patterns: [AdvertisementPattern(adType: 0x01, value: [0x06])])
        // Header: 0x0052, controller 4, 35 parameter octets; count 1; Flags at 0, 1 octet, 0x06,
        // then 30 zero octets of the value field.
        #expect(
            command.bytes == [0x52, 0x00, 0x04, 0x00, 0x23, 0x00, 0x01, 0x01, 0x00, 0x01, 0x06]
                + [UInt8](repeating: 0, count: 30))
        #expect(
            try AdvertisementPattern.decodeList(command.parameters) == [AdvertisementPattern(adType: 1, value: [6])])
        let two = AdvertisementPattern.encodeList([
            AdvertisementPattern(adType: 0x16, offset: 2, value: [0x11, 0x22, 0x33, 0x44]),
            AdvertisementPattern(adType: 0xFF, value: [UInt8](repeating: 0xAB, count: 40)),
        ])
        #expect(two.count == 1 + 2 * 34)
        #expect(Array(two[0..<8]) == [0x02, 0x16, 0x02, 0x04, 0x11, 0x22, 0x33, 0x44])
        // A value over 31 octets is cut to the field.
        #expect(Array(two[35..<38]) == [0xFF, 0x00, 0x1F])
        #expect(try AdvertisementPattern.decodeList(two)[1].value.count == 31)
    }

    @Test("Add Advertisement Patterns Monitor's parameters: a short list or a length over 31 is refused")
    func monitorParametersChecked() {
        #expect(throws: ManagementDecodeError.self) { try AdvertisementPattern.decodeList([]) }
        #expect(throws: ManagementDecodeError.self) {
            try AdvertisementPattern.decodeList([0x02] + [UInt8](repeating: 0, count: 34))
        }
        var long = AdvertisementPattern.encodeList([AdvertisementPattern(adType: 1, value: [6])])
        long[3] = 32
        #expect(throws: ManagementDecodeError.self) { try AdvertisementPattern.decodeList(long) }
    }

    @Test("Remove Advertisement Monitor: the handle (0: all); the handle comes back")
    func removeMonitor() throws {
        #expect(
            ManagementCommand.removeAdvertisementMonitor(controller: 0, handle: 0x0102).bytes == [
                0x53, 0x00, 0x00, 0x00, 0x02, 0x00, 0x02, 0x01,
            ])
        #expect(try ManagementCommand.decodeMonitorHandle([0x01, 0x00], command: 0x0052) == 1)
        #expect(throws: ManagementDecodeError.shortReturnParameters(command: 0x0052, expected: 2, actual: 1)) {
            try ManagementCommand.decodeMonitorHandle([0x01], command: 0x0052)
        }
    }
}
