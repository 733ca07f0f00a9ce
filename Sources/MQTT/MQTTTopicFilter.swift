/// A validated MQTT topic filter (MQTT 5 §4.7): levels separated by `/`, where `+` matches
/// exactly one level and `#` (only as the last level) matches any number of remaining levels,
/// including none.
///
/// Parsing rejects what a broker would reject: an empty filter, `+` or `#` mixed with other
/// characters in a level, `#` before the last level, a NUL character, and more than 65535 bytes.
/// Shared subscriptions (`$share/…`) are not supported and rejected.
public struct MQTTTopicFilter: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The filter as sent in SUBSCRIBE, e.g. `gattway/+/set`.
    public let rawValue: String
    private let levels: [Substring]

    /// Parses and validates `string`.
    public init(_ string: String) throws(MQTTError) {
        func invalid(_ why: String) -> MQTTError {
            MQTTError(.invalidArgument, "topic filter \"\(string)\" is invalid: \(why)")
        }
        guard !string.isEmpty else { throw invalid("it is empty") }
        guard string.utf8.count <= 65535 else { throw invalid("it is longer than 65535 bytes") }
        guard !string.utf8.contains(0) else { throw invalid("it contains a NUL character") }
        if string.hasPrefix("$share/") { throw invalid("shared subscriptions are not supported") }
        let levels = string.split(separator: "/", omittingEmptySubsequences: false)
        for (index, level) in levels.enumerated() {
            if level.contains("#") {
                guard level == "#" else { throw invalid("'#' must be a whole level, as in a/#") }
                guard index == levels.count - 1 else { throw invalid("'#' must be the last level") }
            }
            if level.contains("+") && level != "+" {
                throw invalid("'+' must be a whole level, as in a/+/b")
            }
        }
        rawValue = string
        self.levels = levels
    }

    /// A filter written in source; traps if it is invalid (a programming error, never input).
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure(error.description) }
    }

    /// True when the filter contains `+` or `#`.
    public var hasWildcards: Bool { levels.contains { $0 == "+" || $0 == "#" } }

    /// Whether a message published on `topic` matches this filter. Topics starting with `$`
    /// (e.g. `$SYS/…`) are not matched by a filter starting with a wildcard (MQTT 5 §4.7.2).
    public func matches(_ topic: String) -> Bool {
        if topic.hasPrefix("$"), let first = levels.first, first == "+" || first == "#" { return false }
        var topicLevels = topic.split(separator: "/", omittingEmptySubsequences: false)[...]
        for level in levels {
            if level == "#" { return true }
            guard let next = topicLevels.popFirst() else { return false }
            if level != "+" && level != next { return false }
        }
        return topicLevels.isEmpty
    }

    public var description: String { rawValue }
}
