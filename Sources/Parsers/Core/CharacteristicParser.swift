import Bluetooth

/// Decodes the value of one GATT characteristic into readings.
///
/// Conforming types are pure: the same bytes give the same readings, and a value that breaks the
/// characteristic's rules is a thrown ``ParseError``, never a trap.
public protocol CharacteristicParser: Sendable {
    /// The name used in config.json (`"parser": "battery_level"`).
    var name: String { get }
    /// The characteristic this parser is the default for, nil for parsers chosen by name only.
    var uuid: BluetoothUUID? { get }
    func decode(_ value: [UInt8]) throws(ParseError) -> [Reading]
}
