import Parsers

/// One attribute of a device's state, in 16 bytes: the value (numbers, booleans and null inline;
/// strings and number lists in a box), and the name and the unit/device class as indexes into
/// the gateway's ``AttributeTable``, which holds each distinct name and pair once for all devices.
struct Attribute: Sendable, Equatable {
    private(set) var stored: StoredValue
    /// The unit and device class: an ``AttributeTable`` index, 0 for neither.
    var info: UInt16
    /// The name: an ``AttributeTable`` index.
    let name: UInt16

    init(name: UInt16, value: ReadingValue, info: UInt16) {
        self.stored = StoredValue(value)
        self.info = info
        self.name = name
    }

    var value: ReadingValue {
        get { stored.value }
        set {
            // A string or list identical to the one kept keeps its box: no allocation for a value
            // that repeats in every advertisement (e.g. a MAC address or a firmware text).
            if case .boxed(let old) = stored, StoredValue.identical(old, newValue) { return }
            stored = StoredValue(newValue)
        }
    }
}

/// A ``ReadingValue`` in 9 bytes: what does not fit in 8 is boxed.
enum StoredValue: Sendable, Equatable {
    case number(Double)
    case bool(Bool)
    case null
    /// `.string` and `.numbers`.
    indirect case boxed(ReadingValue)

    init(_ value: ReadingValue) {
        switch value {
        case .number(let number): self = .number(number)
        case .bool(let flag): self = .bool(flag)
        case .null: self = .null
        case .string, .numbers: self = .boxed(value)
        }
    }

    /// Same bytes when published: `==` would take canonically equivalent strings (`é` composed
    /// or not) and `0` and `-0` in a list as equal.
    static func identical(_ lhs: ReadingValue, _ rhs: ReadingValue) -> Bool {
        switch (lhs, rhs) {
        case (.string(let left), .string(let right)): left.utf8.elementsEqual(right.utf8)
        case (.numbers(let left), .numbers(let right)):
            left.count == right.count && zip(left, right).allSatisfy { $0.bitPattern == $1.bitPattern }
        default: false
        }
    }

    var value: ReadingValue {
        switch self {
        case .number(let number): .number(number)
        case .bool(let flag): .bool(flag)
        case .null: .null
        case .boxed(let value): value
        }
    }
}

/// The attribute names, unit/device class pairs and advertisement formats of all devices, each
/// stored once and referred to by a 16-bit index.
///
/// Entries are never removed. What bounds the table is where the strings come from: names,
/// units, classes and formats are the parsers' vocabulary (fixed in the code; BTHome numbers a
/// repeated name with its position in one frame, so at most a few dozen numbered variants) and
/// the configuration's parser fields and characteristics — a few hundred strings at most, not
/// one per device. Should 65,535 of a kind ever be reached, a new name is not stored (the
/// reading is left out of the state), a new pair is stored as neither, a new format as none.
struct AttributeTable: Sendable {
    private var nameTable = Interned<String>()
    /// Index 0 is "neither unit nor class", index 0 of formats "none".
    private var infoTable = Interned<Info>(first: Info(unit: nil, deviceClass: nil))
    private var formatTable = Interned<String>(first: "")

    /// The names, by index (``Attribute/name``).
    var names: [String] { nameTable.values }
    /// The names as JSON keys with their colon (`"temperature":`), by index: for state payloads.
    private(set) var keys: [[UInt8]] = []
    private var infos: [Info] { infoTable.values }
    private var formats: [String] { formatTable.values }

    struct Info: Hashable, Sendable {
        let unit: ReadingUnit?
        let deviceClass: DeviceClass?
    }

    var nameCount: Int { names.count }
    var infoCount: Int { infos.count - 1 }
    var formatCount: Int { formats.count - 1 }

    func name(_ index: UInt16) -> String { names[Int(index)] }
    func info(_ index: UInt16) -> Info { infos[Int(index)] }
    func unit(_ attribute: Attribute) -> String? { infos[Int(attribute.info)].unit?.symbol }
    func deviceClass(_ attribute: Attribute) -> DeviceClass? { infos[Int(attribute.info)].deviceClass }
    /// The format of an index from ``formatIndex(_:)``; nil for 0.
    func format(_ index: UInt16) -> String? { index == 0 ? nil : formats[Int(index)] }

    /// The attribute as a reading (for Home Assistant discovery).
    func reading(_ attribute: Attribute) -> Reading {
        let info = infos[Int(attribute.info)]
        return Reading(
            name: names[Int(attribute.name)], value: attribute.value, unit: info.unit, deviceClass: info.deviceClass)
    }

    /// The index of `name`, stored if new; nil when the table is full.
    mutating func nameIndex(_ name: String) -> UInt16? {
        let index = nameTable.index(of: name)
        while keys.count < nameTable.values.count { keys.append(StatePayload.key(nameTable.values[keys.count])) }
        return index
    }

    /// The index of the pair, stored if new; 0 when both are nil (or the table is full).
    mutating func infoIndex(unit: ReadingUnit?, deviceClass: DeviceClass?) -> UInt16 {
        guard unit != nil || deviceClass != nil else { return 0 }
        return infoTable.index(of: Info(unit: unit, deviceClass: deviceClass)) ?? 0
    }

    /// The index of a format, stored if new; 0 for nil (or when the table is full).
    mutating func formatIndex(_ format: String?) -> UInt16 {
        guard let format else { return 0 }
        return formatTable.index(of: format) ?? 0
    }
}
