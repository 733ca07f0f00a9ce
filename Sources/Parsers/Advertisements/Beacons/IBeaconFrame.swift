import Bluetooth

/// The fields of an iBeacon frame (`02 15`, proximity UUID, major, minor, power byte), shared by
/// ``IBeacon`` and the sensor beacons that wrap their readings in one (Tilt, ABTemp, Jaalee,
/// Radioland). Apple Proximity Beacon specification; the power byte is int8 dBm at 1 m.
///
/// Holds the payload instead of copies of its parts: every wrapped-sensor parser is tried on every
/// iBeacon before the plain one, so recognising a frame must not allocate.
struct IBeaconFrame: Sendable {
    /// The payload; the proximity UUID is bytes 2..<18.
    private let payload: [UInt8]
    var major: UInt16
    var minor: UInt16
    /// The measured-power byte as sent (the sensor beacons reuse it).
    var power: UInt8

    /// Nil when the payload is not an iBeacon frame; throws when it starts like one but is short.
    init?(_ payload: [UInt8]) throws(ParseError) {
        guard payload.count >= 2, payload[0] == 0x02, payload[1] == 0x15 else { return nil }
        guard payload.count >= 23 else { throw .tooShort("iBeacon", need: 23, got: payload.count) }
        var reader = ByteReader(payload, from: 18, what: "iBeacon")
        major = try reader.u16be()
        minor = try reader.u16be()
        power = try reader.u8()
        self.payload = payload
    }

    /// Byte `index` (0–15) of the proximity UUID.
    func uuidByte(_ index: Int) -> UInt8 { payload[2 + min(max(index, 0), 15)] }

    /// True when the proximity UUID bytes from `offset` on start with `bytes`.
    func uuidHasPrefix(_ bytes: [UInt8], from offset: Int = 0) -> Bool {
        guard offset >= 0, offset + bytes.count <= 16 else { return false }
        return payload[(2 + offset)..<(2 + offset + bytes.count)].elementsEqual(bytes)
    }

    /// The first byte after the 23-byte frame (Jaalee appends its battery byte there).
    var trailerFirst: UInt8? { payload.count > 23 ? payload[23] : nil }

    /// The iBeacon readings: `uuid`, `major`, `minor` and `tx_power` (or `voltage` when the power
    /// byte is positive, which cannot be an RSSI at 1 m: several sensor beacons put the battery
    /// voltage there in 0.1 V).
    func readings(major includeMajor: Bool = true, minor includeMinor: Bool = true) -> [Reading] {
        var readings = [Reading].reserved()
        readings.append(Reading("uuid", string: BluetoothUUID(bytes: payload, at: 2)?.description ?? ""))
        if includeMajor { readings.append(Reading("major", Double(major))) }
        if includeMinor { readings.append(Reading("minor", Double(minor))) }
        let signed = Int8(bitPattern: power)
        readings.append(signed > 0 ? Reading(.voltage, decimal(signed, 1)) : Reading(.txPower, Double(signed)))
        return readings
    }
}
