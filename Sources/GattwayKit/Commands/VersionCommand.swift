/// `gattway version`: the version, the Swift compiler and the C libraries it was built against.
struct VersionCommand: Command {
    static let name = "version"
    static let summary = "Print the version of gattway."
    static let options: [Option] = [.flag("json", "Print a JSON object instead of text.")]

    let json: Bool

    init(parsing arguments: ParsedArguments) throws {
        json = arguments.flag("json")
    }

    func run() async throws -> ExitCode {
        #if compiler(>=6.3)
            let swift = "6.3+"
        #else
            let swift = "6.x"
        #endif
        if json {
            standardOutput("{\"version\":\"\(BuildInfo.version)\",\"swift\":\"\(swift)\"}\n")
        } else {
            standardOutput("gattway \(BuildInfo.version) (Swift \(swift))\n")
        }
        return .success
    }
}
