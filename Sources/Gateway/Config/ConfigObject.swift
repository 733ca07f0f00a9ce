import JSON

/// One JSON object of the config being read: remembers the keys asked for, reports every other
/// key as unknown (naming the keys it expected), and records problems instead of stopping.
struct ConfigObject {
    let reader: JSONObjectReader
    let problems: ConfigProblems
    private(set) var known: [String] = []

    /// Reads `reader` as an object; nil (with a recorded problem) when it is not one.
    init?(_ reader: JSONReader, _ problems: ConfigProblems) {
        guard let object = problems.attempt({ try reader.object() }) else { return nil }
        self.reader = object
        self.problems = problems
    }

    var path: String { reader.path }

    func childPath(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// The value at `key`, or nil when absent or null.
    mutating func value(_ key: String) -> JSONReader? {
        known.append(key)
        return reader.optional(key)
    }

    /// Reads `key` with `read`; absent → `fallback`, invalid → problem recorded and `fallback`.
    mutating func read<T>(_ key: String, default fallback: T, _ read: (JSONReader) throws -> T) -> T {
        guard let value = value(key) else { return fallback }
        return problems.attempt { try read(value) } ?? fallback
    }

    /// Reads an optional `key`; invalid → problem recorded and nil.
    mutating func optional<T>(_ key: String, _ read: (JSONReader) throws -> T) -> T? {
        guard let value = value(key) else { return nil }
        return problems.attempt { try read(value) }
    }

    /// Reads a required `key`; absent → problem "is required (`expected`)", invalid → problem; both nil.
    mutating func required<T>(_ key: String, expected: String, _ read: (JSONReader) throws -> T) -> T? {
        guard let value = value(key) else {
            problems.add(childPath(key), "is required (\(expected))")
            return nil
        }
        return problems.attempt { try read(value) }
    }

    /// Records one problem per key that was never asked for.
    func finish() {
        for member in reader.members where !known.contains(member.key) {
            problems.add(childPath(member.key), "is not a known key (expected one of \(known.joined(separator: ", ")))")
        }
    }
}
