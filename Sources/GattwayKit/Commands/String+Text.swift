import JSON

#if canImport(Glibc)
    import Glibc
#endif

/// Text helpers the CLI used to take from Foundation (`trimmingCharacters`, `padding`,
/// `String(format:)`, `FileHandle.standardError`), so the executable links no Foundation at all
/// (scripts/check-layering.sh; BENCHMARKS.md, resident memory).
extension StringProtocol {
    /// Without leading and trailing whitespace and newlines.
    func trimmingWhitespace() -> String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }

    /// Cut or padded with spaces to exactly `width` characters.
    func padded(to width: Int) -> String {
        count >= width ? String(prefix(width)) : String(self) + String(repeating: " ", count: width - count)
    }
}

extension String {
    /// `value` as at least two digits, zero-padded (`%02d`).
    init(twoDigits value: Int32) {
        self = value < 10 && value >= 0 ? "0\(value)" : "\(value)"
    }
}

/// Writes `text` to standard error (unbuffered, like `FileHandle.standardError.write`).
func writeToStandardError(_ text: String) {
    var bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress! + offset, $0.count - offset) }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return }
        offset += written
    }
}
