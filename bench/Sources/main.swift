import Foundation

// gattway-bench: `make bench` runs `gattway-bench run [SUITE...]`; suites start their own helper
// processes as `gattway-bench child ROLE ...`. `make soak` runs `gattway-bench soak [MINUTES]`.
let suites: [any BenchSuite.Type] = [
    DBusBench.self, MQTTBench.self, SimulatorBench.self, ParsersBench.self, GatewayBench.self, PeerSuite.self,
    RealisticSuite.self, ESPHomeBench.self, FleetBench.self, RadioBench.self, AdaptersBench.self,
    BulkBench.self, PresenceBench.self, WebBench.self,
]

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "child":
    let roleArguments = Array(arguments.dropFirst())
    for suite in suites where try await suite.child(roleArguments) { exit(0) }
    FileHandle.standardError.write(Data("gattway-bench: unknown child role \(roleArguments.first ?? "")\n".utf8))
    exit(64)
case "run", nil:
    let wanted = Set(arguments.dropFirst())
    var rows: [BenchRow] = []
    for suite in suites where wanted.isEmpty ? !suite.onlyWhenNamed : wanted.contains(suite.name) {
        FileHandle.standardError.write(Data("running \(suite.name)…\n".utf8))
        rows += try await suite.run()
    }
    BenchTable.print(rows)
    try BenchTable.write(rows, to: ProcessInfo.processInfo.environment["BENCH_RESULTS"] ?? "bench/results.json")
case "soak":
    // `make soak MINUTES=30`: a long run with faults on a schedule (Soak.swift, RELIABILITY.md).
    // The accounting of readings is checked on made-up damage first.
    let problems = SensorAccount.selfTest()
    guard problems.isEmpty else {
        FileHandle.standardError.write(
            Data("gattway-bench soak: the readings accounting miscounts:\n\(problems.joined(separator: "\n"))\n".utf8))
        exit(1)
    }
    let text = arguments.dropFirst().first ?? ProcessInfo.processInfo.environment["MINUTES"] ?? "30"
    guard let minutes = Double(text), minutes > 0, minutes <= 24 * 60 else {
        FileHandle.standardError.write(
            Data("gattway-bench soak: \"\(text)\" is not a number of minutes (more than 0, at most 1440)\n".utf8))
        exit(64)
    }
    exit(try await Soak.run(minutes: minutes) ? 0 : 1)
default:
    FileHandle.standardError.write(Data("usage: gattway-bench run [SUITE...] | gattway-bench soak [MINUTES]\n".utf8))
    exit(64)
}
