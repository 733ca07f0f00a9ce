import Bluetooth
import Testing

@Suite("Advertisement bytes: AD structures built from AdvertisementData")
struct AdvertisementBytesTests {
    @Test func rebuildsEachFieldInOrder() throws {
        let custom = try #require(BluetoothUUID("12345678-9abc-def0-1234-56789abcdef0"))
        let data = AdvertisementData(
            localName: "Ruuvi 4A5F", serviceUUIDs: [BluetoothUUID(0x180F), custom],
            manufacturerData: [0x0499: [0x05, 0x01], 0x004C: [0x02]],
            serviceData: [BluetoothUUID(0xFCD2): [0x40, 0x01, 0x5D]], txPower: -4, rssi: -60)
        let bytes = AdvertisementBytes.build(data)
        let expected: [UInt8] =
            [0x04, 0xFF, 0x4C, 0x00, 0x02]  // manufacturer data, company ids ascending, little endian
            + [0x05, 0xFF, 0x99, 0x04, 0x05, 0x01]
            + [0x06, 0x16, 0xD2, 0xFC, 0x40, 0x01, 0x5D]  // service data 16-bit UUID
            + [0x03, 0x03, 0x0F, 0x18]  // 16-bit UUID list
            + [0x11, 0x07] + custom.octets.reversed()  // 128-bit UUID list, little endian
            + [0x02, 0x0A, 0xFC]  // TX power
            + [0x0B, 0x09] + Array("Ruuvi 4A5F".utf8)  // complete local name
        #expect(bytes == expected)
    }

    @Test func staysWithin62BytesAndShortensTheName() {
        let data = AdvertisementData(
            localName: "ÅÅÅÅÅÅÅÅÅÅ", manufacturerData: [0x0499: [UInt8](repeating: 1, count: 24)],
            serviceData: [BluetoothUUID(0xFCD2): [UInt8](repeating: 2, count: 13)])
        let bytes = AdvertisementBytes.build(data)
        #expect(bytes.count <= AdvertisementBytes.maximumLength)
        // 28 + 17 bytes of data, then 15 bytes of room: the name (0x08, shortened) keeps 7 of its
        // 2-byte characters, not half of the 8th.
        #expect(bytes[45] == 15 && bytes[46] == 0x08)
        #expect(String(validating: bytes[47...], as: UTF8.self) == "ÅÅÅÅÅÅÅ")
        // A structure too large for the 62 bytes is left out, the rest kept.
        let huge = AdvertisementData(manufacturerData: [1: [UInt8](repeating: 0, count: 100)], txPower: 0)
        #expect(AdvertisementBytes.build(huge) == [0x02, 0x0A, 0x00])
    }
}
