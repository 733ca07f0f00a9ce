import Bluetooth
import JSON

/// Collects every problem found while reading config.json, so one run reports them all.
final class ConfigProblems {
    private(set) var errors: [JSONPathError] = []

    func add(_ path: String, _ message: String) {
        errors.append(JSONPathError(path: path, message: message))
    }

    func add(_ error: any Error) {
        if let error = error as? JSONPathError {
            errors.append(error)
        } else {
            errors.append(JSONPathError(path: "", message: "\(error)"))
        }
    }

    /// Runs `body`; a thrown error is recorded and nil returned.
    func attempt<T>(_ body: () throws -> T) -> T? {
        do {
            return try body()
        } catch {
            add(error)
            return nil
        }
    }
}

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

extension JSONReader {
    /// A duration string ("500ms", "30s", "5m") greater than zero.
    func positiveDuration() throws -> Double {
        let seconds = try duration()
        guard seconds > 0 else { throw fail("expected a duration greater than zero, e.g. \"30s\"") }
        return seconds
    }

    /// A Bluetooth UUID ("180F", "0000180f-0000-1000-8000-00805f9b34fb").
    func uuid() throws -> BluetoothUUID {
        let text = try string()
        guard let uuid = BluetoothUUID(text) else {
            throw fail("\"\(text)\" is not a Bluetooth UUID (expected 4 or 8 hex digits such as \"180F\", or a 128-bit UUID)")
        }
        return uuid
    }

    /// A non-empty string.
    func nonEmptyString() throws -> String {
        let text = try string()
        guard !text.isEmpty else { throw fail("expected a non-empty string") }
        return text
    }

    /// An MQTT QoS level.
    func qos() throws -> Int { try integer(in: 0...2) }
}
