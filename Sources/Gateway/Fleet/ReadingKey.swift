import Parsers

/// The content key of a decoded advertisement, by which a fleet recognises a reading another
/// gateway already published (docs/fleet.md, "No duplicates"): the payload's own counter where
/// the format has one (BTHome and ATC/pvvx/Qingping `packet_id`, Ruuvi `measurement_sequence`,
/// BTHome's `encryption_counter`), else a hash of every reading's name and value. FNV-1a, 64 bits.
enum ReadingKey {
    static let counterNames: Set<String> = ["packet_id", "measurement_sequence", "encryption_counter"]

    static func of(_ readings: [Reading], format: String?) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func byte(_ byte: UInt8) {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        func text(_ text: String) {
            for value in text.utf8 { byte(value) }
            byte(0)
        }
        func number(_ number: Double) {
            var bits = number.bitPattern
            for _ in 0..<8 {
                byte(UInt8(truncatingIfNeeded: bits))
                bits >>= 8
            }
        }
        if let format { text(format) }
        if let counter = readings.first(where: { counterNames.contains($0.name) }), let value = counter.value.number {
            text(counter.name)
            number(value)
            return hash
        }
        for reading in readings {
            text(reading.name)
            switch reading.value {
            case .number(let value): number(value)
            case .bool(let flag): byte(flag ? 1 : 0)
            case .string(let value): text(value)
            case .null: byte(0xFF)
            case .numbers(let values): for value in values { number(value) }
            }
        }
        return hash
    }
}
