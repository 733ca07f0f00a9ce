import Foundation
import TestSupport
import Testing

@Suite("gattway command line")
struct CommandLineTests {
    let gattway: String

    init() throws {
        gattway = try BuiltProduct.path("gattway")
    }

    @Test("--help lists every command with its summary and the exit codes")
    func overviewHelp() async throws {
        let result = try await ChildProcess.run(gattway, ["--help"])
        #expect(result.status == 0)
        #expect(result.output.contains("usage: gattway <command>"))
        #expect(result.output.contains("version"))
        #expect(result.output.contains("78 configuration error"))
    }

    @Test("version prints the version, as text and as JSON")
    func version() async throws {
        let text = try await ChildProcess.run(gattway, ["version"])
        #expect(text.status == 0)
        #expect(text.output.hasPrefix("gattway "))
        let json = try await ChildProcess.run(gattway, ["version", "--json"])
        #expect(json.status == 0)
        let object = try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any]
        #expect((object?["version"] as? String)?.isEmpty == false)
    }

    @Test("a command's --help is generated from its declared options")
    func commandHelp() async throws {
        let result = try await ChildProcess.run(gattway, ["version", "--help"])
        #expect(result.status == 0)
        #expect(result.output.contains("usage: gattway version [options]"))
        #expect(result.output.contains("--json"))
    }

    @Test(
        "usage errors exit 64 and say what was wrong",
        arguments: [
            (["frobnicate"], "unknown command \"frobnicate\""),
            (["version", "--bogus"], "unknown option --bogus"),
            (["version", "extra"], "unexpected argument \"extra\""),
        ])
    func usageErrors(arguments: [String], message: String) async throws {
        let result = try await ChildProcess.run(gattway, arguments)
        #expect(result.status == 64)
        #expect(result.output.contains(message))
    }
}
