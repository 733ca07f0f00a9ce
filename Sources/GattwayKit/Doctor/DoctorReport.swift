import JSON

/// The result of `gattway doctor`: every check in order, the exit code and both renderings.
///
/// Exit code: 78 (`EX_CONFIG`) when the configuration is invalid or unreadable — whatever else
/// failed, because the other checks ran on defaults and fixing the file comes first (and it is
/// what `gattway run` and `gattway config check` return for the same file, and what the systemd
/// unit treats as not worth a restart); else 1 when any check failed; else 0 (warnings allowed).
struct DoctorReport: Sendable {
    var checks: [DoctorCheck] = []

    mutating func add(_ check: DoctorCheck) { checks.append(check) }
    mutating func add(_ more: [DoctorCheck]) { checks += more }

    var exitCode: ExitCode {
        if checks.contains(where: { $0.configProblem }) { return .config }
        if checks.contains(where: { $0.status == .fail }) { return .failure }
        return .success
    }

    var failures: Int { checks.filter { $0.status == .fail }.count }
    var warnings: Int { checks.filter { $0.status == .warn }.count }

    /// One line per check, then a summary line.
    var text: String {
        var lines = checks.map(\.line)
        let summary: String
        switch (failures, warnings) {
        case (0, 0): summary = "all \(checks.count) checks passed"
        case (0, let w): summary = "no failures, \(w) warning\(w == 1 ? "" : "s")"
        case (let f, let w): summary = "\(f) check\(f == 1 ? "" : "s") failed, \(w) warning\(w == 1 ? "" : "s")"
        }
        lines.append("")
        lines.append(summary + " (exit \(exitCode.rawValue))")
        return lines.joined(separator: "\n") + "\n"
    }

    /// `{"status":"fail","exit_code":1,"checks":[{"check","status","found","fix"}…]}`.
    var json: JSONValue {
        let overall = checks.map(\.status).max() ?? .ok
        return .object([
            (key: "status", value: .string(overall.rawValue)),
            (key: "exit_code", value: .number(Double(exitCode.rawValue))),
            (key: "checks", value: .array(checks.map(\.json))),
        ])
    }
}
