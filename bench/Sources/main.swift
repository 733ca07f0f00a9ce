import Foundation

// gattway-bench: `make bench` runs `gattway-bench run [SUITE...]`; suites start their own helper
// processes as `gattway-bench child ROLE ...`.
let suites: [any BenchSuite.Type] = [
    DBusBench.self, MQTTBench.self, SimulatorBench.self, ParsersBench.self, GatewayBench.self, PeerSuite.self,
    RealisticSuite.self,
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
default:
    FileHandle.standardError.write(Data("usage: gattway-bench run [SUITE...]\n".utf8))
    exit(64)
}
