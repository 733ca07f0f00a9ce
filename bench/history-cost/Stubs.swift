// What ReadingHistory.swift uses of Parsers and Gateway, with the same shapes, so that it compiles
// alone (history-cost.sh): a reading's name and value, a registry slot.

enum ReadingValue {
    case number(Double)
    case bool(Bool)
    case string(String)
    case null
    case numbers([Double])
}

struct Reading {
    var name: String
    var value: ReadingValue
    var unitCode: UInt16?
    var deviceClass: UInt16?
}

struct DeviceID: Hashable {
    let slot: Int32

    var index: Int { Int(slot) }
}

extension Int64 {
    /// As JSON's `Int64(saturating:)`.
    init(saturating value: Double) {
        self = value >= 9.2e18 ? .max : value <= -9.2e18 ? .min : Int64(value)  // checked: clamped above
    }
}
