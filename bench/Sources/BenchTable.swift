import Foundation

/// One measured figure of `make bench`: printed as a table row and written to bench/results.json.
struct BenchRow: Codable, Sendable {
    /// What was measured, e.g. "D-Bus signals received from a second process".
    var name: String
    /// The figure, e.g. 45210.
    var value: Double
    /// Its unit, e.g. "signals/s".
    var unit: String
    /// The target from the issue, when there is one, e.g. "≥ 20000".
    var target: String? = nil
    /// Free-form conditions: message size, in-flight window, counts.
    var detail: String = ""
}

/// A group of benchmarks; each suite lives in its own file and registers in `main.swift`.
protocol BenchSuite {
    /// Short name used on the command line: `gattway-bench run dbus`.
    static var name: String { get }
    /// Runs the measurements and returns their rows.
    static func run() async throws -> [BenchRow]
    /// Handles a helper subprocess role (e.g. a signal emitter) when `arguments[0]` names one of
    /// this suite's roles; returns false when the role is not this suite's.
    static func child(_ arguments: [String]) async throws -> Bool
    /// True for a suite that another suite already contains (`realistic` is a phase of `gateway`):
    /// it runs only when named, not in `gattway-bench run` without suite names.
    static var onlyWhenNamed: Bool { get }
}

extension BenchSuite {
    static func child(_ arguments: [String]) async throws -> Bool { false }
    static var onlyWhenNamed: Bool { false }
}

enum BenchTable {
    static func print(_ rows: [BenchRow]) {
        let nameWidth = max(10, rows.map(\.name.count).max() ?? 0)
        func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
        Swift.print(
            pad("benchmark", nameWidth) + "  " + pad("value", 14) + pad("unit", 16) + pad("target", 12) + "detail")
        for row in rows {
            let value = row.value >= 100 ? String(format: "%.0f", row.value) : String(format: "%.3f", row.value)
            Swift.print(
                pad(row.name, nameWidth) + "  " + pad(value, 14) + pad(row.unit, 16) + pad(row.target ?? "", 12)
                    + row.detail)
        }
    }

    static func write(_ rows: [BenchRow], to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        var data = try encoder.encode(rows)
        data.append(0x0A)
        try data.write(to: URL(fileURLWithPath: path))
    }
}
