import Bluetooth
import Testing

@Suite("Bluetooth vocabulary")
struct BluetoothVocabularyTests {
    @Test(
        "addresses parse in any case and separator and print upper case with colons",
        arguments: ["A4:C1:38:0B:12:34", "a4:c1:38:0b:12:34", "A4-C1-38-0B-12-34", "a4c1380b1234"])
    func addressParsing(_ text: String) throws {
        let address = try #require(BluetoothAddress(text))
        #expect(address.description == "A4:C1:38:0B:12:34")
        #expect(address.octets == [0xA4, 0xC1, 0x38, 0x0B, 0x12, 0x34])
        #expect(address.bluezPathComponent == "dev_A4_C1_38_0B_12_34")
    }

    @Test(
        "malformed addresses are rejected",
        arguments: [
            "", "AA:BB", "A4:C1:38:0B:12:3", "A4:C1:38:0B:12:34:56",
            "G4:C1:38:0B:12:34", "A4C1:38:0B:12:34", "A4::C1:38:0B:12:34",
        ])
    func badAddresses(_ text: String) {
        #expect(BluetoothAddress(text) == nil)
    }

    @Test("on-air (little-endian) octets reverse into the written order")
    func littleEndian() {
        #expect(
            BluetoothAddress(littleEndianOctets: [0x34, 0x12, 0x0B, 0x38, 0xC1, 0xA4])
                == BluetoothAddress("A4:C1:38:0B:12:34"))
        #expect(BluetoothAddress(octets: [1, 2, 3]) == nil)
    }

    @Test("UUIDs are equal across 16-, 32- and 128-bit forms and print as BlueZ does")
    func uuidForms() throws {
        let short = try #require(BluetoothUUID("180F"))
        let long = try #require(BluetoothUUID("0000180f-0000-1000-8000-00805f9b34fb"))
        let thirtyTwo = try #require(BluetoothUUID("0000180F"))
        #expect(short == long && long == thirtyTwo && short == BluetoothUUID(0x180F))
        #expect(Set([short, long, thirtyTwo]).count == 1)
        #expect(long.description == "0000180f-0000-1000-8000-00805f9b34fb")
        #expect(long.shortDescription == "180F")
        #expect(long.width == .bits16 && long.uint16 == 0x180F)
        #expect(short.name == "Battery Service")
        #expect(BluetoothUUID(0x2A19).name == "Battery Level")
    }

    @Test("vendor 128-bit UUIDs keep their full form")
    func vendorUUID() throws {
        let uuid = try #require(BluetoothUUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E"))
        #expect(uuid.width == .bits128 && uuid.uint16 == nil && uuid.name == nil)
        #expect(uuid.description == "6e400001-b5a3-f393-e0a9-e50e24dcca9e")
        #expect(uuid.shortDescription == uuid.description)
        #expect(BluetoothUUID(octets: uuid.octets) == uuid)
        #expect(BluetoothUUID(bits32: 0x1234_5678).width == .bits32)
    }

    @Test(
        "malformed UUIDs are rejected",
        arguments: [
            "", "18F", "180G", "0000180f-0000-1000-8000-00805f9b34f",
            "0000180f00-00-1000-8000-00805f9b34fb", "18-0F",
        ])
    func badUUIDs(_ text: String) {
        #expect(BluetoothUUID(text) == nil)
    }

    @Test("characteristic properties round-trip BlueZ flag strings")
    func properties() {
        var unknown: [String] = []
        let properties = CharacteristicProperties(
            bluezFlags: ["read", "write-without-response", "notify", "x-new"],
            unknown: &unknown)
        #expect(properties == [.read, .writeWithoutResponse, .notify])
        #expect(unknown == ["x-new"])
        #expect(properties.bluezFlags == ["read", "write-without-response", "notify"])
        #expect(properties.description == "read,write-without-response,notify")
        let all = CharacteristicProperties(bluezFlags: CharacteristicProperties.bluezFlags.map(\.flag))
        #expect(all.bluezFlags.count == CharacteristicProperties.bluezFlags.count)
    }

    @Test("advertisement data merges like BlueZ's device cache")
    func merge() {
        var cached = AdvertisementData(
            localName: "ATC_1", serviceUUIDs: [BluetoothUUID(0x181A)],
            manufacturerData: [0x0499: [5]], rssi: -70)
        cached.merge(
            AdvertisementData(
                serviceUUIDs: [BluetoothUUID(0x181A), BluetoothUUID(0xFCD2)],
                manufacturerData: [0x0499: [3]], serviceData: [BluetoothUUID(0xFCD2): [0x40]], rssi: -60))
        #expect(cached.localName == "ATC_1")
        #expect(cached.serviceUUIDs == [BluetoothUUID(0x181A), BluetoothUUID(0xFCD2)])
        #expect(cached.manufacturerData[0x0499] == [3])
        #expect(cached.serviceData[BluetoothUUID(0xFCD2)] == [0x40])
        #expect(cached.rssi == -60)
        #expect(!cached.isEmpty && AdvertisementData().isEmpty)
    }
}
