import Gateway

/// `gattway config check FILE`: validates a config.json the way `gattway run` does at start.
/// Prints one line per problem (JSON path, what was wrong, what was expected) on stderr and
/// exits 78 (`EX_CONFIG`), or prints a one-line summary and exits 0.
struct ConfigCheckCommand: Command {
    static let name = "config check"
    static let summary = "Validate a config.json (exit 78 with one line per problem)."
    static let discussion = """
        Every problem is reported, each naming its JSON path and what was expected, e.g. \
        devices[2].match.address: "AA:BB" is not a Bluetooth address (expected six hex octets, \
        e.g. A4:C1:38:0B:12:34). docs/config.md documents every key with its default.
        """
    static let positionals = [Positional(name: "FILE", help: "The configuration file (e.g. /etc/gattway/config.json).")]

    let path: String

    init(parsing arguments: ParsedArguments) throws {
        path = arguments.positional("FILE") ?? ""
    }

    func run() async throws -> ExitCode {
        do {
            let config = try GatewayConfig.load(path: path)
            standardOutput("\(path): ok (\(config.summary))\n")
            return .success
        } catch {
            standardError(error.lines.map { "\(path): \($0)\n" }.joined())
            return .config
        }
    }
}
