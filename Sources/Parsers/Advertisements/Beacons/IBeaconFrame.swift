import Bluetooth

/// The fields of an iBeacon frame (`02 15`, proximity UUID, major, minor, power byte), shared by
/// ``IBeacon`` and the sensor beacons that wrap their readings in one (Tilt, ABTemp, Jaalee,
/// Radioland). Apple Proximity Beacon specification; the power byte is int8 dBm at 1 m.
struct IBeaconFrame: Sendable {
    /// The 16 proximity-UUID bytes as sent.
    var uuid: [UInt8]
    var major: UInt16
    var minor: UInt16
    /// The measured-power byte as sent (the sensor beacons reuse it).
    var power: UInt8
    /// Bytes after the 23-byte frame (Jaalee appends its battery byte).
    var trailer: [UInt8]

    /// Nil when the payload is not an iBeacon frame; throws when it starts like one but is short.
    init?(_ payload: [UInt8]) throws(ParseError) {
        guard payload.count >= 2, payload[0] == 0x02, payload[1] == 0x15 else { return nil }
        guard payload.count >= 23 else { throw .tooShort("iBeacon", need: 23, got: payload.count) }
        var reader = ByteReader(payload, from: 2, what: "iBeacon")
        uuid = try reader.bytes(16)
        major = try reader.u16be()
        minor = try reader.u16be()
        power = try reader.u8()
        trailer = reader.rest()
    }

    /// True when the proximity UUID starts with `prefix`.
    func uuidHasPrefix(_ prefix: [UInt8]) -> Bool {
        uuid.count >= prefix.count && uuid.starts(with: prefix)
    }

    /// The iBeacon readings: `uuid`, `major`, `minor` and `tx_power` (or `voltage` when the power
    /// byte is positive, which cannot be an RSSI at 1 m: several sensor beacons put the battery
    /// voltage there in 0.1 V).
    func readings(major includeMajor: Bool = true, minor includeMinor: Bool = true) -> [Reading] {
        var readings = [Reading("uuid", string: BluetoothUUID(bytes: uuid, at: 0)?.description ?? "")]
        if includeMajor { readings.append(Reading("major", Double(major))) }
        if includeMinor { readings.append(Reading("minor", Double(minor))) }
        let signed = Int8(bitPattern: power)
        readings.append(signed > 0 ? Reading(.voltage, decimal(signed, 1)) : Reading(.txPower, Double(signed)))
        return readings
    }
}
