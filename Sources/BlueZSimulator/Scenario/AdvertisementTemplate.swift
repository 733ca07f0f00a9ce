import Bluetooth
import EventLoop
import JSON

/// Sensor advertisement formats the simulator can produce, so the demo and the tests show real,
/// decodable sensors. Byte layouts follow the published formats (bthome.io v2, the ATC1441 and
/// pvvx custom firmware formats, Ruuvi data format 5) as docs/parsers.md ("Byte formats") states them.
public enum AdvertisementTemplate: String, Sendable, CaseIterable {
    /// BTHome v2, service data 0xFCD2, unencrypted.
    case bthomeV2 = "bthome_v2"
    /// ATC1441 custom firmware, service data 0x181A, 13 bytes.
    case atc1441
    /// pvvx custom firmware, service data 0x181A, 15 bytes.
    case pvvx
    /// Ruuvi RAWv2 (data format 5), manufacturer data 0x0499, 24 bytes.
    case ruuviRAWv2 = "ruuvi_rawv2"
    /// Not a sensor: the simulator's monotonic clock (CLOCK_MONOTONIC, ns, u64 little endian) when
    /// the report is made, as manufacturer data 0xFFFF (the company id reserved for tests), so a
    /// benchmark on the same machine can measure how long an advertisement takes to reach it.
    case monotonicStamp = "monotonic_stamp"

    /// The fields a scenario may drive, and their defaults when it does not.
    public var defaults: [(name: String, value: Double)] {
        switch self {
        case .bthomeV2:
            [("packet_id", 0), ("battery", 97), ("temperature", 21.5), ("humidity", 45.3)]
        case .atc1441:
            [("temperature", 21.5), ("humidity", 45), ("battery", 97), ("voltage", 3.05), ("counter", 0)]
        case .pvvx:
            [("temperature", 21.5), ("humidity", 45.3), ("voltage", 3.05), ("battery", 97), ("counter", 0)]
        case .ruuviRAWv2:
            [
                ("temperature", 21.5), ("humidity", 45.3), ("pressure", 1013.25), ("acceleration_x", 0),
                ("acceleration_y", 0), ("acceleration_z", 1), ("voltage", 2.95), ("tx_power", 4),
                ("movement_counter", 0), ("sequence", 0),
            ]
        case .monotonicStamp:
            []
        }
    }

    /// BTHome v2 fields beyond the defaults that a scenario may add.
    static let bthomeExtra = ["pressure", "illuminance", "voltage", "co2", "moisture"]

    public var fieldNames: [String] {
        defaults.map(\.name) + (self == .bthomeV2 ? Self.bthomeExtra : [])
    }

    /// Where the payload goes in the advertisement.
    public var key: AdvertisementKey {
        switch self {
        case .bthomeV2: .serviceData(BluetoothUUID(0xFCD2))
        case .atc1441, .pvvx: .serviceData(BluetoothUUID(0x181A))
        case .ruuviRAWv2: .manufacturerData(0x0499)
        case .monotonicStamp: .manufacturerData(0xFFFF)
        }
    }

    /// Encodes one advertisement; `values` holds the current field values (missing ones take
    /// the defaults). `address` goes into formats that carry the MAC.
    public func encode(_ values: [String: Double], address: BluetoothAddress) -> [UInt8] {
        func value(_ name: String) -> Double {
            values[name] ?? defaults.first { $0.name == name }?.value ?? 0
        }
        func int(_ v: Double, _ range: ClosedRange<Double>) -> Int64 {
            Int64(saturating: min(max(v.rounded(), range.lowerBound), range.upperBound))
        }
        func le(_ v: Int64, _ count: Int) -> [UInt8] {
            (0..<count).map { UInt8(truncatingIfNeeded: v >> (8 * Int64($0))) }
        }
        func be(_ v: Int64, _ count: Int) -> [UInt8] { le(v, count).reversed() }
        let mac = address.octets
        switch self {
        case .bthomeV2:
            // Objects in ascending id order (bthome.io recommends it).
            var bytes: [UInt8] = [0x40]
            bytes += [0x00] + le(int(value("packet_id"), 0...255), 1)
            bytes += [0x01] + le(int(value("battery"), 0...100), 1)
            bytes += [0x02] + le(int(value("temperature") / 0.01, -32768...32767), 2)
            bytes += [0x03] + le(int(value("humidity") / 0.01, 0...65535), 2)
            if let pressure = values["pressure"] { bytes += [0x04] + le(int(pressure / 0.01, 0...16_777_215), 3) }
            if let lux = values["illuminance"] { bytes += [0x05] + le(int(lux / 0.01, 0...16_777_215), 3) }
            if let volts = values["voltage"] { bytes += [0x0C] + le(int(volts / 0.001, 0...65535), 2) }
            if let co2 = values["co2"] { bytes += [0x12] + le(int(co2, 0...65535), 2) }
            if let moisture = values["moisture"] { bytes += [0x14] + le(int(moisture / 0.01, 0...65535), 2) }
            return bytes
        case .atc1441:
            return mac
                + be(int(value("temperature") / 0.1, -32768...32767), 2)
                + le(int(value("humidity"), 0...100), 1)
                + le(int(value("battery"), 0...100), 1)
                + be(int(value("voltage") * 1000, 0...65535), 2)
                + le(int(value("counter"), 0...255), 1)
        case .pvvx:
            return mac.reversed()
                + le(int(value("temperature") / 0.01, -32768...32767), 2)
                + le(int(value("humidity") / 0.01, 0...65535), 2)
                + le(int(value("voltage") * 1000, 0...65535), 2)
                + le(int(value("battery"), 0...100), 1)
                + le(int(value("counter"), 0...255), 1)
                + [0x04]
        case .ruuviRAWv2:
            let millivolts = int(value("voltage") * 1000 - 1600, 0...2046)
            let tx = int((value("tx_power") + 40) / 2, 0...30)
            return [0x05]
                + be(int(value("temperature") / 0.005, -32767...32767), 2)
                + be(int(value("humidity") / 0.0025, 0...65534), 2)
                + be(int(value("pressure") * 100 - 50000, 0...65534), 2)
                + be(int(value("acceleration_x") * 1000, -32767...32767), 2)
                + be(int(value("acceleration_y") * 1000, -32767...32767), 2)
                + be(int(value("acceleration_z") * 1000, -32767...32767), 2)
                + be(millivolts << 5 | tx, 2)
                + le(int(value("movement_counter"), 0...254), 1)
                + be(int(value("sequence"), 0...65534), 2)
                + mac
        case .monotonicStamp:
            return le(Int64(bitPattern: EventLoop.now()), 8)
        }
    }
}

/// Where an advertisement payload sits: manufacturer data by company id or service data by UUID.
public enum AdvertisementKey: Sendable, Hashable {
    case manufacturerData(UInt16)
    case serviceData(BluetoothUUID)
}
