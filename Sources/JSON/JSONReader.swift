/// Reads a JSON document with every error naming the JSON path of the offending value, e.g.
/// `devices[2].rssi: expected an integer from -127 to 20, got "loud"`.
///
/// Unknown keys are errors too (a typo in a configuration should not be silently ignored); each
/// object reader records the keys it consumed and ``JSONObjectReader/finish()`` reports the rest.
public struct JSONReader: Sendable {
    public let path: String
    public let value: JSONValue

    /// Parses UTF-8 JSON text; a syntax error becomes a ``JSONPathError`` at the root.
    public static func parse<C: Collection>(_ data: C) throws -> JSONReader where C.Element == UInt8 {
        do {
            return JSONReader(path: "", value: try JSONValue.parse(data))
        } catch {
            throw JSONPathError(path: "", message: "\(error)")
        }
    }

    public init(path: String, value: JSONValue) {
        self.path = path
        self.value = value
    }

    public func fail(_ message: String) -> JSONPathError {
        JSONPathError(path: path, message: message)
    }

    private var shown: String {
        switch value {
        case .null: "null"
        case .bool(let b): b ? "true" : "false"
        case .number(let n): abs(n) < 1e15 ? Int64(exactly: n).map { String($0) } ?? String(n) : String(n)
        case .string(let s): "\"\(s)\""
        case .array: "an array"
        case .object: "an object"
        }
    }

    public var isNull: Bool { value == .null }

    public func string() throws -> String {
        guard case .string(let s) = value else { throw fail("expected a string, got \(shown)") }
        return s
    }

    public func bool() throws -> Bool {
        guard case .bool(let b) = value else { throw fail("expected true or false, got \(shown)") }
        return b
    }

    public func number() throws -> Double {
        guard case .number(let n) = value else { throw fail("expected a number, got \(shown)") }
        return n
    }

    public func integer(in range: ClosedRange<Int>) throws -> Int {
        // Int(exactly:) rather than a comparison with Double(range.upperBound): Double(Int.max)
        // rounds up to 2^63, which Int cannot hold.
        guard case .number(let number) = value, let integer = Int(exactly: number), range.contains(integer) else {
            throw fail("expected an integer from \(range.lowerBound) to \(range.upperBound), got \(shown)")
        }
        return integer
    }

    /// A duration written as "500ms", "2s", "5m" or a number of seconds, at most
    /// ``DurationText/maximumSeconds``.
    public func duration() throws -> Double {
        if case .number(let n) = value, let seconds = DurationText.bounded(n) { return seconds }
        if case .string(let text) = value, let seconds = DurationText.seconds(text) { return seconds }
        throw fail(
            "expected a duration such as \"500ms\", \"2s\" or \"5m\" (at most \(DurationText.maximumText)), got \(shown)"
        )
    }

    public func array() throws -> [JSONReader] {
        guard case .array(let items) = value else { throw fail("expected an array, got \(shown)") }
        return items.enumerated().map { JSONReader(path: "\(path)[\($0.offset)]", value: $0.element) }
    }

    public func object() throws -> JSONObjectReader {
        guard case .object(let members) = value else { throw fail("expected an object, got \(shown)") }
        return JSONObjectReader(path: path, members: members)
    }
}

/// A JSON object being read key by key; see ``JSONReader``.
public final class JSONObjectReader {
    public let path: String
    public let members: [(key: String, value: JSONValue)]
    private var consumed: Set<String> = []

    public init(path: String, members: [(key: String, value: JSONValue)]) {
        self.path = path
        self.members = members
    }

    private func childPath(_ key: String) -> String {
        path.isEmpty ? key : "\(path).\(key)"
    }

    /// The value at `key`, or nil when absent (null counts as absent).
    public func optional(_ key: String) -> JSONReader? {
        consumed.insert(key)
        guard let value = members.last(where: { $0.key == key })?.value, value != .null else { return nil }
        return JSONReader(path: childPath(key), value: value)
    }

    /// The value at `key`; a missing key is an error naming it.
    public func required(_ key: String) throws -> JSONReader {
        guard let reader = optional(key) else {
            throw JSONPathError(path: childPath(key), message: "is required")
        }
        return reader
    }

    /// Every key with its reader, in file order (for maps such as `manufacturer_data`).
    public func entries() -> [(key: String, value: JSONReader)] {
        members.map { member in
            consumed.insert(member.key)
            return (member.key, JSONReader(path: childPath(member.key), value: member.value))
        }
    }

    /// Throws for the first key that was never read (a typo, or an unsupported option).
    public func finish() throws {
        if let unknown = members.map(\.key).first(where: { !consumed.contains($0) }) {
            throw JSONPathError(path: childPath(unknown), message: "is not a known key")
        }
    }
}

/// A problem in a JSON document, naming the JSON path and what was expected.
public struct JSONPathError: Error, CustomStringConvertible, Sendable {
    public let path: String
    public let message: String
    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }
    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}
