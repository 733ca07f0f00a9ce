import Parsers

/// One attribute of a device's state.
struct Attribute: Sendable, Equatable {
    var name: String
    var value: ReadingValue
}
