/// Reading advertising data (AD structures, Core spec Vol 3 Part C 11; the same layout as BR/EDR's
/// extended inquiry response) into ``AdvertisementData``: the reverse of ``AdvertisementBytes``.
///
/// Each structure is a length octet (covering the type and the data), a type octet and the data.
/// Read:
///
/// - service UUID lists, incomplete and complete, 16-bit (0x02, 0x03), 32-bit (0x04, 0x05) and
///   128-bit (0x06, 0x07), little endian; a UUID already listed is not listed again, and octets
///   left over after the last whole UUID are ignored;
/// - the shortened (0x08) or complete (0x09) local name, UTF-8 (invalid sequences replaced), cut
///   at a NUL some devices append; the last one wins;
/// - TX power level (0x0A, one signed octet);
/// - service data for a 16-bit (0x16), 32-bit (0x20) or 128-bit (0x21) UUID, keyed by the UUID
///   with the UUID removed; the last one for a UUID wins;
/// - manufacturer-specific data (0xFF), keyed by the little-endian company id with the id
///   removed; the last one for a company wins.
///
/// Skipped: flags (0x01) and every other type, and a structure too short for its type (service
/// data without a whole UUID, manufacturer data without a company id, TX power without its
/// octet). A zero length octet ends the data (the zero padding of a fixed-size report); a
/// structure whose length runs past the end is dropped, and what was read before it is kept.
///
/// This runs for every report the kernel delivers (thousands a second): it walks the bytes in
/// place, makes no array of structures, and makes a `String` only for a name.
extension AdvertisementData {
    /// Reads AD structures (an advertising report, a scan response, or the two concatenated as
    /// the kernel's Device Found event carries them). `rssi` is left nil.
    public init(advertisingData bytes: some Collection<UInt8>) {
        self.init()
        let done: Void? = bytes.withContiguousStorageIfAvailable { buffer in
            self.read(buffer)
        }
        if done == nil {
            let copy = Array(bytes)
            copy.withUnsafeBufferPointer { read($0) }
        }
    }

    private mutating func read(_ bytes: UnsafeBufferPointer<UInt8>) {
        let count = bytes.count
        var index = 0
        while index < count {
            let length = Int(bytes[index])
            if length == 0 { break }
            let end = index + 1 + length
            if end > count { break }
            let type = bytes[index + 1]
            let data = UnsafeBufferPointer(rebasing: bytes[(index + 2)..<end])
            index = end
            switch type {
            case 0x02, 0x03:
                var offset = 0
                while offset + 2 <= data.count {
                    addServiceUUID(BluetoothUUID(Self.uint16(data, offset)))
                    offset += 2
                }
            case 0x04, 0x05:
                var offset = 0
                while offset + 4 <= data.count {
                    addServiceUUID(BluetoothUUID(bits32: Self.uint32(data, offset)))
                    offset += 4
                }
            case 0x06, 0x07:
                var offset = 0
                while offset + 16 <= data.count {
                    addServiceUUID(Self.uuid128(data, offset))
                    offset += 16
                }
            case 0x08, 0x09:
                var nameEnd = 0
                while nameEnd < data.count, data[nameEnd] != 0 { nameEnd += 1 }
                localName = String(decoding: UnsafeBufferPointer(rebasing: data[0..<nameEnd]), as: UTF8.self)
            case 0x0A:
                if data.count >= 1 { txPower = Int8(bitPattern: data[0]) }
            case 0x16:
                if data.count >= 2 { serviceData[BluetoothUUID(Self.uint16(data, 0))] = Array(data[2...]) }
            case 0x20:
                if data.count >= 4 { serviceData[BluetoothUUID(bits32: Self.uint32(data, 0))] = Array(data[4...]) }
            case 0x21:
                if data.count >= 16 { serviceData[Self.uuid128(data, 0)] = Array(data[16...]) }
            case 0xFF:
                if data.count >= 2 { manufacturerData[Self.uint16(data, 0)] = Array(data[2...]) }
            default:
                break
            }
        }
    }

    private mutating func addServiceUUID(_ uuid: BluetoothUUID) {
        if !serviceUUIDs.contains(uuid) { serviceUUIDs.append(uuid) }
    }

    private static func uint16(_ data: UnsafeBufferPointer<UInt8>, _ offset: Int) -> UInt16 {
        UInt16(data[offset]) | UInt16(data[offset + 1]) << 8
    }

    private static func uint32(_ data: UnsafeBufferPointer<UInt8>, _ offset: Int) -> UInt32 {
        UInt32(data[offset]) | UInt32(data[offset + 1]) << 8 | UInt32(data[offset + 2]) << 16
            | UInt32(data[offset + 3]) << 24
    }

    /// 16 octets in on-air (little-endian) order.
    private static func uuid128(_ data: UnsafeBufferPointer<UInt8>, _ offset: Int) -> BluetoothUUID {
        var high: UInt64 = 0
        var low: UInt64 = 0
        for index in (offset..<(offset + 8)).reversed() { low = low << 8 | UInt64(data[index]) }
        for index in ((offset + 8)..<(offset + 16)).reversed() { high = high << 8 | UInt64(data[index]) }
        return BluetoothUUID(high: high, low: low)
    }
}
