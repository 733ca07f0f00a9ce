import Foundation

/// Reads a JSON document with every error naming the JSON path of the offending value, e.g.
/// `devices[2].rssi: expected a number between -127 and 20, got "loud"`.
///
/// Unknown keys are errors too (a typo in a scenario should not be silently ignored); each reader
/// records the keys it consumed and ``finish()`` reports the rest.
struct JSONReader {
    let path: String
    let value: JSONValue

    /// Parses `data` as JSON.
    static func parse(_ data: Data) throws -> JSONReader {
        do {
            return JSONReader(path: "", value: try JSONValue.parse(data))
        } catch {
            throw ScenarioError(path: "", message: "\(error)")
        }
    }

    init(path: String, value: JSONValue) {
        self.path = path
        self.value = value
    }

    func fail(_ message: String) -> ScenarioError {
        ScenarioError(path: path, message: message)
    }

    private var shown: String {
        switch value {
        case .null: "null"
        case .bool(let b): b ? "true" : "false"
        case .number(let n): n.rounded() == n && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        case .string(let s): "\"\(s)\""
        case .array: "an array"
        case .object: "an object"
        }
    }

    var isNull: Bool { value == .null }

    func string() throws -> String {
        guard case .string(let s) = value else { throw fail("expected a string, got \(shown)") }
        return s
    }

    func bool() throws -> Bool {
        guard case .bool(let b) = value else { throw fail("expected true or false, got \(shown)") }
        return b
    }

    func number() throws -> Double {
        guard case .number(let n) = value else { throw fail("expected a number, got \(shown)") }
        return n
    }

    func integer(in range: ClosedRange<Int>) throws -> Int {
        guard case .number(let number) = value, number.rounded() == number,
            number >= Double(range.lowerBound), number <= Double(range.upperBound)
        else {
            throw fail("expected an integer from \(range.lowerBound) to \(range.upperBound), got \(shown)")
        }
        return Int(number)
    }

    /// A duration written as "500ms", "2s", "5m" or a number of seconds.
    func duration() throws -> Double {
        if case .number(let n) = value, n >= 0 { return n }
        if case .string(let text) = value {
            let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
            for (suffix, factor) in units where text.hasSuffix(suffix) {
                if let v = Double(text.dropLast(suffix.count)), v >= 0, v.isFinite { return v * factor }
                break
            }
        }
        throw fail("expected a duration such as \"500ms\", \"2s\" or \"5m\", got \(shown)")
    }

    func array() throws -> [JSONReader] {
        guard case .array(let items) = value else { throw fail("expected an array, got \(shown)") }
        return items.enumerated().map { JSONReader(path: "\(path)[\($0.offset)]", value: $0.element) }
    }

    func object() throws -> JSONObjectReader {
        guard case .object(let members) = value else { throw fail("expected an object, got \(shown)") }
        return JSONObjectReader(path: path, members: members)
    }
}

/// A JSON object being read key by key; see ``JSONReader``.
final class JSONObjectReader {
    let path: String
    let members: [(key: String, value: JSONValue)]
    private var consumed: Set<String> = []

    init(path: String, members: [(key: String, value: JSONValue)]) {
        self.path = path
        self.members = members
    }

    private func childPath(_ key: String) -> String {
        path.isEmpty ? key : "\(path).\(key)"
    }

    /// The value at `key`, or nil when absent (null counts as absent).
    func optional(_ key: String) -> JSONReader? {
        consumed.insert(key)
        guard let value = members.last(where: { $0.key == key })?.value, value != .null else { return nil }
        return JSONReader(path: childPath(key), value: value)
    }

    /// The value at `key`; a missing key is an error naming it.
    func required(_ key: String) throws -> JSONReader {
        guard let reader = optional(key) else {
            throw ScenarioError(path: childPath(key), message: "is required")
        }
        return reader
    }

    /// Every key with its reader, in file order (for maps such as `manufacturer_data`).
    func entries() -> [(key: String, value: JSONReader)] {
        members.map { member in
            consumed.insert(member.key)
            return (member.key, JSONReader(path: childPath(member.key), value: member.value))
        }
    }

    /// Throws for the first key that was never read (a typo, or an unsupported option).
    func finish() throws {
        if let unknown = members.map(\.key).first(where: { !consumed.contains($0) }) {
            throw ScenarioError(path: childPath(unknown), message: "is not a known key")
        }
    }
}

/// A scenario file problem, naming the JSON path and what was expected.
public struct ScenarioError: Error, CustomStringConvertible, Sendable {
    public let path: String
    public let message: String
    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}
