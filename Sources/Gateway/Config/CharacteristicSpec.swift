import Bluetooth
import JSON
import Parsers

/// One entry of a device rule's `subscribe` or `poll` list: a characteristic and its parser.
public struct CharacteristicSpec: Sendable {
    /// The service the characteristic is under; nil: the first characteristic with this UUID.
    public var service: BluetoothUUID?
    public var characteristic: BluetoothUUID
    /// The parser: by config name, else the default for the UUID.
    public var parser: any CharacteristicParser
    /// `poll` only: seconds between reads.
    public var interval: Double?

    init?(_ reader: JSONReader, poll: Bool, registry: ParserRegistry, problems: ConfigProblems) {
        guard var object = ConfigObject(reader, problems) else { return nil }
        service = object.optional("service") { try $0.uuid() }
        let uuid = object.required("characteristic", expected: "a characteristic UUID such as \"2A19\"") {
            try $0.uuid()
        }
        let parserName = object.optional("parser") { try $0.nonEmptyString() }
        if poll {
            interval = object.required("interval", expected: "a duration such as \"5m\"") { try $0.positiveDuration() }
        }
        object.finish()
        guard let uuid else { return nil }
        characteristic = uuid
        if let parserName {
            guard let parser = registry.characteristicParser(named: parserName) else {
                problems.add(
                    object.childPath("parser"),
                    "\"\(parserName)\" is not a characteristic parser (expected one of \(registry.characteristicParserNames.joined(separator: ", ")))"
                )
                return nil
            }
            self.parser = parser
        } else {
            guard let parser = registry.characteristicParser(for: uuid) else {
                problems.add(
                    object.childPath("parser"),
                    "is required: there is no built-in parser for \(uuid.shortDescription) (name one, e.g. a declarative parser)"
                )
                return nil
            }
            self.parser = parser
        }
        if poll && interval == nil { return nil }
    }
}
