import Bluetooth
import Parsers

/// The pulse characteristic of a made-up chest strap (vendor UUID below): one flags byte
/// (bit 0: skin contact), the pulse in beats per minute (u8) and the battery in % (u8).
struct StrapPulse: CharacteristicParser {
    /// What config.json names: `"subscribe": [{"characteristic": "…", "parser": "strap_pulse"}]`.
    var name: String { "strap_pulse" }
    /// With a UUID, the parser is also the default for this characteristic (no `parser` needed in
    /// config.json, and `gattway read`, `notify` and `decode` show its readings); nil: by name only.
    var uuid: BluetoothUUID? { BluetoothUUID("6e400010-b5a3-f393-e0a9-e50e24dcca9e") }

    func decode(_ value: [UInt8]) throws(ParseError) -> [Reading] {
        guard value.count == 3 else {
            throw ParseError(.length, "strap pulse is 3 bytes, got \(value.count)")
        }
        guard value[2] <= 100 else { throw ParseError(.reservedValue, "battery \(value[2]) % is above 100 %") }
        return [
            Reading(.heartRate, Double(value[1])),
            Reading("contact", bool: value[0] & 1 != 0),
            Reading(.battery, Double(value[2])),
        ]
    }
}
