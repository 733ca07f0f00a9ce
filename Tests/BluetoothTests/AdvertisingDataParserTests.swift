import Bluetooth
import Testing

@Suite("Advertising data parser: AD structures read into AdvertisementData")
struct AdvertisingDataParserTests {
    static let custom = BluetoothUUID("12345678-9abc-def0-1234-56789abcdef0")!

    @Test("each AD type gattway reads lands in its field; flags and unknown types are skipped")
    func readsEachField() {
        let bytes: [UInt8] =
            [0x02, 0x01, 0x06]  // flags: skipped
            + [0x05, 0x02, 0x0F, 0x18, 0x0A, 0x18]  // incomplete 16-bit list: 180F, 180A
            + [0x05, 0x04, 0x78, 0x56, 0x34, 0x12]  // incomplete 32-bit list: 12345678
            + [0x11, 0x07] + Self.custom.octets.reversed()  // complete 128-bit list
            + [0x04, 0x08, 0x52, 0x75, 0x75]  // shortened name "Ruu"
            + [0x02, 0x0A, 0xF8]  // TX power -8
            + [0x06, 0x16, 0xD2, 0xFC, 0x40, 0x01, 0x5D]  // BTHome service data
            + [0x07, 0x20, 0x78, 0x56, 0x34, 0x12, 0xAA, 0xBB]  // 32-bit service data
            + [0x12, 0x21] + Self.custom.octets.reversed() + [0x01]  // 128-bit service data
            + [0x05, 0xFF, 0x99, 0x04, 0x05, 0x01]  // Ruuvi manufacturer data
            + [0x03, 0x19, 0x40, 0x02]  // appearance: skipped
        let data = AdvertisementData(advertisingData: bytes)
        #expect(
            data
                == AdvertisementData(
                    localName: "Ruu",
                    serviceUUIDs: [
                        BluetoothUUID(0x180F), BluetoothUUID(0x180A), BluetoothUUID(bits32: 0x1234_5678), Self.custom,
                    ],
                    manufacturerData: [0x0499: [0x05, 0x01]],
                    serviceData: [
                        BluetoothUUID(0xFCD2): [0x40, 0x01, 0x5D], BluetoothUUID(bits32: 0x1234_5678): [0xAA, 0xBB],
                        Self.custom: [0x01],
                    ],
                    txPower: -8))
    }

    @Test("a zero length ends the data; a structure running past the end is dropped, the rest kept")
    func lengthsBoundTheWalk() {
        let padded: [UInt8] = [0x03, 0xFF, 0x4C, 0x00, 0x00, 0x00, 0x03, 0x09, 0x41, 0x42]
        #expect(AdvertisementData(advertisingData: padded) == AdvertisementData(manufacturerData: [0x004C: []]))
        let overrun: [UInt8] = [0x03, 0x09, 0x41, 0x42, 0x09, 0xFF, 0x4C, 0x00, 0x01]
        #expect(AdvertisementData(advertisingData: overrun) == AdvertisementData(localName: "AB"))
        #expect(AdvertisementData(advertisingData: [0x05]) == AdvertisementData())
        #expect(AdvertisementData(advertisingData: [UInt8]()) == AdvertisementData())
    }

    @Test("structures too short for their type are skipped, partial UUIDs ignored, duplicates listed once")
    func shortStructures() {
        let bytes: [UInt8] =
            [0x02, 0xFF, 0x4C]  // manufacturer data without a whole company id
            + [0x02, 0x16, 0xD2]  // service data without a whole UUID
            + [0x01, 0x0A]  // TX power without its octet
            + [0x04, 0x03, 0x0F, 0x18, 0x0A]  // one whole UUID and a stray octet
            + [0x03, 0x02, 0x0F, 0x18]  // the same UUID again
        #expect(AdvertisementData(advertisingData: bytes) == AdvertisementData(serviceUUIDs: [BluetoothUUID(0x180F)]))
    }

    @Test("the last name, company or service data wins; a name stops at a NUL; bad UTF-8 is replaced")
    func laterStructuresReplace() {
        let bytes: [UInt8] =
            [0x04, 0xFF, 0x4C, 0x00, 0x01] + [0x04, 0xFF, 0x4C, 0x00, 0x02]
            + [0x03, 0x08, 0x41, 0x42] + [0x05, 0x09, 0x43, 0x44, 0x00, 0x45]
        let data = AdvertisementData(advertisingData: bytes)
        #expect(data.manufacturerData == [0x004C: [0x02]] && data.localName == "CD")
        #expect(AdvertisementData(advertisingData: [0x03, 0x09, 0x41, 0xFF]).localName == "A\u{FFFD}")
    }

    @Test("any collection of octets reads alike (contiguous or not)")
    func collections() {
        let bytes: [UInt8] = [0x00, 0x04, 0xFF, 0x99, 0x04, 0x05]
        let expected = AdvertisementData(manufacturerData: [0x0499: [0x05]])
        #expect(AdvertisementData(advertisingData: bytes.dropFirst()) == expected)
        #expect(AdvertisementData(advertisingData: bytes.dropFirst().reversed().reversed()) == expected)
    }

    @Test("AdvertisementBytes' output reads back to what was built")
    func roundTrip() throws {
        let original = AdvertisementData(
            localName: "Ruuvi 4A5F", serviceUUIDs: [BluetoothUUID(0x180F), Self.custom],
            manufacturerData: [0x0499: [0x05, 0x01], 0x004C: []],
            serviceData: [BluetoothUUID(0xFCD2): [0x40, 0x01, 0x5D], BluetoothUUID(bits32: 0x1234_5678): [0x01]],
            txPower: -4)
        let bytes = AdvertisementBytes.build(original)
        // Everything fits in 62 octets, so nothing was left out.
        #expect(bytes.count <= AdvertisementBytes.maximumLength)
        #expect(AdvertisementData(advertisingData: bytes) == original)
        // And the other way: built again from what was read gives the same octets.
        #expect(AdvertisementBytes.build(AdvertisementData(advertisingData: bytes)) == bytes)
    }
}
