import DBus

/// The changed properties of a `PropertiesChanged` signal (its `a{sv}`), read as the dictionary
/// ``DBusValue/dictionary`` would make of them — keyed by the text of `s`, `o` or `g` keys, the
/// last entry winning when a name repeats — but kept as the decoded entries themselves.
///
/// A signal carries one to three properties, and this runs for every advertisement report: a
/// `Dictionary` cost an allocation and a string hash per lookup (half a dozen per report),
/// where a scan of two entries costs a couple of comparisons and no allocation.
struct PropertyChanges {
    /// The entries in wire order; an entry whose key is not string-like is never read.
    private var entries: [DBusDictionaryEntry]

    /// The changed properties of `value` (an `a{sv}`); none when it is not a dictionary with
    /// string-like keys (as `value.dictionary ?? [:]`).
    init(_ value: DBusValue) {
        guard case .dictionary(let keyType, _, let entries) = value.unwrapped,
            keyType == .string || keyType == .objectPath || keyType == .signature
        else {
            self.entries = []
            return
        }
        self.entries = entries
    }

    /// The properties of a dictionary (in its order, which does not matter: names are unique).
    init(_ dictionary: [String: DBusValue]) {
        entries = dictionary.map { DBusDictionaryEntry(.string($0.key), $0.value) }
    }

    /// The value of property `name` (the last entry of that name), or nil. Setting appends an
    /// entry (so it wins); setting nil removes every entry of that name.
    subscript(name: String) -> DBusValue? {
        get {
            var index = entries.endIndex
            while index > entries.startIndex {
                index -= 1
                if Self.key(entries[index].key, is: name) { return entries[index].value }
            }
            return nil
        }
        set {
            if let newValue {
                entries.append(DBusDictionaryEntry(.string(name), newValue))
            } else {
                entries.removeAll { Self.key($0.key, is: name) }
            }
        }
    }

    mutating func removeValue(forKey name: String) {
        self[name] = nil
    }

    /// Whether any of `names` is among the properties.
    func contains(anyOf names: [String]) -> Bool {
        entries.contains { entry in names.contains { Self.key(entry.key, is: $0) } }
    }

    /// Whether `key`'s text (``DBus/DBusValue/stringLike``) is `name`, matched in place rather
    /// than through a copy of the key: this runs a few times per advertisement report.
    private static func key(_ key: DBusValue, is name: String) -> Bool {
        switch key {
        case .string(let text): text == name
        case .objectPath(let path): path.rawValue == name
        case .signature(let signature): signature.description == name
        default: false
        }
    }

    /// Calls `body` with each property in wire order; a name that repeats comes more than once,
    /// so applying them in order leaves the last value, as a dictionary holds it.
    func forEach(_ body: (_ name: String, _ value: DBusValue) -> Void) {
        for entry in entries {
            if let name = entry.key.stringLike { body(name, entry.value) }
        }
    }
}
