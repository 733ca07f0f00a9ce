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
        precondition(families.insert(name).inserted, "metric family \(name) written twice")
        current = name
        append("# HELP ")
        append(name)
        append(" ")
        append(Self.escapeHelp(help))
        append("\n# TYPE ")
        append(name)
        append(" ")
        append(kind.rawValue)
        append("\n")
    }

    /// One sample of the current family (`suffix` for e.g. a histogram's parts; none here).
    /// Written straight into ``bytes``: a scrape writes one per device and family.
    public mutating func sample(_ labels: [(name: String, value: String)] = [], _ value: Double) {
        guard let name = current else { preconditionFailure("a sample before its family") }
        append(name)
        if !labels.isEmpty {
            bytes.append(UInt8(ascii: "{"))
            for (index, label) in labels.enumerated() {
                precondition(Self.isLabelName(label.name), "invalid label name \(label.name)")
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                append(label.name)
                append("=\"")
                append(Self.escapeLabelValue(label.value))
                bytes.append(UInt8(ascii: "\""))
            }
            bytes.append(UInt8(ascii: "}"))
        }
        bytes.append(UInt8(ascii: " "))
        Self.write(value, into: &bytes)
        bytes.append(UInt8(ascii: "\n"))
    }

    /// A family with one sample.
    public mutating func single(_ name: String, _ kind: Kind, help: String, _ value: Double) {
        family(name, kind, help: help)
        sample([], value)
    }

    /// `\` → `\\`, `"` → `\"`, newline → `\n`.
    public static func escapeLabelValue(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 0x5C || $0 == 0x22 || $0 == 0x0A }) else { return text }
        return escape(text, quotes: true)
    }

    /// `\` → `\\`, newline → `\n` (HELP text).
    public static func escapeHelp(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 0x5C || $0 == 0x0A }) else { return text }
        return escape(text, quotes: false)
    }

    private static func escape(_ text: String, quotes: Bool) -> String {
        var out = ""
        for character in text.unicodeScalars {
            switch character {
            case "\\": out += "\\\\"
            case "\"" where quotes: out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }

    /// Integers without a fraction, NaN and ±Inf as Prometheus spells them.
    public static func format(_ value: Double) -> String {
        var bytes: [UInt8] = []
        write(value, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// ``format(_:)`` appended to `bytes`; an integer's digits without a string between.
    static func write(_ value: Double, into bytes: inout [UInt8]) {
        if value.isNaN {
            bytes += "NaN".utf8
        } else if value.isInfinite {
            bytes += (value > 0 ? "+Inf" : "-Inf").utf8
        } else if value == value.rounded(), abs(value) < 1e15 {
            var integer = Int64(value)
            if integer < 0 {
                bytes.append(UInt8(ascii: "-"))
                integer = -integer
            }
            let start = bytes.count
            repeat {
                bytes.append(UInt8(ascii: "0") + UInt8(integer % 10))
                integer /= 10
            } while integer > 0
            bytes[start...].reverse()
        } else {
            bytes += "\(value)".utf8
        }
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`
    public static func isMetricName(_ name: String) -> Bool { isName(name, colon: true) }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved).
    public static func isLabelName(_ name: String) -> Bool { isName(name, colon: false) && !name.hasPrefix("__") }

    private static func isName(_ name: String, colon: Bool) -> Bool {
        guard !name.isEmpty else { return false }
        var first = true
        for byte in name.utf8 {
            let letter = (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F
            let digit = byte >= 0x30 && byte <= 0x39
            guard letter || (digit && !first) || (colon && byte == 0x3A) else { return false }
            first = false
        }
        return true
    }

    private mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }
}
