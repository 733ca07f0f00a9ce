/// Prometheus's text exposition format (version 0.0.4): each metric family once, its `# HELP`
/// and `# TYPE` lines, then its samples `name{label="value",…} value`. Label values are escaped
/// (`\\`, `\"`, `\n`): device names and addresses are untrusted input. Names that are not valid
/// metric or label names are a programming error (they are ours, never the input's).
public struct PrometheusText {
    public enum Kind: String, Sendable {
        case counter, gauge
    }

    public private(set) var bytes: [UInt8] = []
    private var families: Set<String> = []
    private var current: String?

    /// The media type of a scrape's answer.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    public init() {}

    /// Starts the family `name`; its samples must follow before the next family starts. A family
    /// that was started before is a programming error.
    public mutating func family(_ name: String, _ kind: Kind, help: String) {
        precondition(Self.isMetricName(name), "invalid metric name \(name)")
        precondition(!families.contains(name), "metric family \(name) written twice")
        families.insert(name)
        current = name
        append("# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(kind.rawValue)\n")
    }

    /// One sample of the current family (`suffix` for e.g. a histogram's parts; none here).
    public mutating func sample(_ labels: [(name: String, value: String)] = [], _ value: Double) {
        guard let name = current else { preconditionFailure("a sample before its family") }
        append(name)
        if !labels.isEmpty {
            append("{")
            for (index, label) in labels.enumerated() {
                precondition(Self.isLabelName(label.name), "invalid label name \(label.name)")
                append((index > 0 ? "," : "") + label.name + "=\"" + Self.escapeLabelValue(label.value) + "\"")
            }
            append("}")
        }
        append(" " + Self.format(value) + "\n")
    }

    /// A family with one sample.
    public mutating func single(_ name: String, _ kind: Kind, help: String, _ value: Double) {
        family(name, kind, help: help)
        sample([], value)
    }

    /// `\` → `\\`, `"` → `\"`, newline → `\n`.
    public static func escapeLabelValue(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 0x5C || $0 == 0x22 || $0 == 0x0A }) else { return text }
        var out = ""
        for character in text.unicodeScalars {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }

    /// `\` → `\\`, newline → `\n` (HELP text).
    public static func escapeHelp(_ text: String) -> String {
        var out = ""
        for character in text.unicodeScalars {
            switch character {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }

    /// Integers without a fraction, NaN and ±Inf as Prometheus spells them.
    public static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`
    public static func isMetricName(_ name: String) -> Bool { isName(name, colon: true) }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved).
    public static func isLabelName(_ name: String) -> Bool { isName(name, colon: false) && !name.hasPrefix("__") }

    private static func isName(_ name: String, colon: Bool) -> Bool {
        guard !name.isEmpty else { return false }
        for (index, byte) in name.utf8.enumerated() {
            let letter = (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F
            let digit = byte >= 0x30 && byte <= 0x39
            guard letter || (digit && index > 0) || (colon && byte == 0x3A) else { return false }
        }
        return true
    }

    private mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }
}
