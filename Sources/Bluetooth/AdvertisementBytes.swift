/// Rebuilds advertising data (AD structures: length, type, data) from what BlueZ's `Device1`
/// exposes, for BluetoothLERawAdvertisementsResponse. BlueZ hands out the parsed fields of a
/// device's merged advertisements, not the packets, so what is rebuilt is what BlueZ keeps:
///
/// - manufacturer data (0xFF), one structure per company id, ids in ascending order;
/// - service data (0x16, 0x20, 0x21 for 16-, 32- and 128-bit UUIDs), in UUID order;
/// - service UUIDs (complete lists 0x03, 0x05, 0x07);
/// - TX power (0x0A);
/// - the name, always as a complete local name (0x09): BlueZ does not say whether it was shortened.
///
/// Not rebuilt, because `Device1` does not carry it: the flags (0x01; BlueZ's experimental
/// `AdvertisingFlags` is not read), appearance, and any AD type BlueZ does not parse. Where a packet
/// had several frames of one company or UUID (e.g. alternating frames), BlueZ keeps only the
/// latest, and so does this. A structure that does not fit in ESPHome's 62 bytes (advertisement
/// plus scan response) is left out, in the order above (data first, the name last).
public enum AdvertisementBytes {
    public static let maximumLength = 62

    public static func build(_ advertisement: AdvertisementData) -> [UInt8] {
        var bytes: [UInt8] = []
        func add(_ type: UInt8, _ data: [UInt8]) {
            guard data.count <= 254, bytes.count + 2 + data.count <= maximumLength else { return }
            bytes.append(UInt8(truncatingIfNeeded: data.count + 1))
            bytes.append(type)
            bytes += data
        }
        for company in advertisement.manufacturerData.keys.sorted() {
            let data = advertisement.manufacturerData[company] ?? []
            add(0xFF, [UInt8(truncatingIfNeeded: company), UInt8(truncatingIfNeeded: company >> 8)] + data)
        }
        for uuid in advertisement.serviceData.keys.sorted() {
            let data = advertisement.serviceData[uuid] ?? []
            let (type, encoded) = littleEndian(uuid)
            add(type == 0x03 ? 0x16 : type == 0x05 ? 0x20 : 0x21, encoded + data)
        }
        var lists: [UInt8: [UInt8]] = [:]
        for uuid in advertisement.serviceUUIDs {
            let (type, encoded) = littleEndian(uuid)
            lists[type, default: []] += encoded
        }
        for type in lists.keys.sorted() { add(type, lists[type] ?? []) }
        if let power = advertisement.txPower { add(0x0A, [UInt8(bitPattern: power)]) }
        if let name = advertisement.localName {
            // A long name is cut to what fits (as a device would shorten it), on a UTF-8 boundary.
            var utf8 = Array(name.utf8)
            let room = maximumLength - bytes.count - 2
            if utf8.count > room, room > 0 {
                utf8 = Array(utf8.prefix(room))
                while let last = utf8.last, last & 0xC0 == 0x80 { utf8.removeLast() }
                if let last = utf8.last, last >= 0xC0 { utf8.removeLast() }
                add(0x08, utf8)
            } else {
                add(0x09, utf8)
            }
        }
        return bytes
    }

    /// The UUID list AD type of the UUID's width and its little-endian bytes.
    private static func littleEndian(_ uuid: BluetoothUUID) -> (UInt8, [UInt8]) {
        switch uuid.width {
        case .bits16:
            let value = uuid.uint16 ?? 0
            return (0x03, [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8)])
        case .bits32:
            let value = uuid.uint32 ?? 0
            return (0x05, (0..<4).map { UInt8(truncatingIfNeeded: value >> UInt32(8 * $0)) })
        case .bits128:
            return (0x07, uuid.octets.reversed())
        }
    }
}
