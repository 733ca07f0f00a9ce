import Foundation
import Testing
import TestSupport

/// `gattway advertise` and `gattway serve`: what they refuse before touching the bus.
@Suite("gattway peripheral commands")
struct PeripheralCommandTests {
    let gattway: String

    init() throws {
        gattway = try BuiltProduct.path("gattway")
    }

    @Test("advertise refuses an advertisement over 31 bytes with exit 64, naming the size and the fields")
    func advertiseTooLarge() throws {
        let result = try ChildProcess.run(
            gattway, ["advertise", "--name", "Kitchen sensor", "--service", "6e400001-b5a3-f393-e0a9-e50e24dcca9e"])
        #expect(result.status == 64)
        #expect(result.output.contains("advertisement needs 37 bytes, legacy limit is 31"), "\(result.output)")
        #expect(result.output.contains("local name \"Kitchen sensor\" 16"))
        #expect(result.output.contains("shorten the local name by 6 bytes"))
    }

    @Test("advertise refuses malformed data options with exit 64")
    func advertiseBadOptions() throws {
        let data = try ChildProcess.run(gattway, ["advertise", "--service-data", "180F:64"])
        #expect(data.status == 64)
        #expect(data.output.contains("--service-data: expected KEY=HEX"))
        let company = try ChildProcess.run(gattway, ["advertise", "--manufacturer-data", "0x1ffff=01"])
        #expect(company.status == 64)
        #expect(company.output.contains("is not a company id"))
    }

    @Test("serve names the JSON path of a bad tree and exits 64")
    func serveBadTree() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gattway-serve-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let cases: [(String, String)] = [
            (#"{"services": [{"uuid": "180F", "characteristics": [{"uuid": "2A19", "properties": ["read", "nottify"]}]}]}"#,
             #"services[0].characteristics[0].properties: "nottify" is not a BlueZ flag"#),
            (#"{"services": [{"uuid": "180F", "characteristics": [{"uuid": "2A19", "properties": ["read"], "value": 300, "encoding": "u8"}]}]}"#,
             "services[0].characteristics[0].value: 300 is out of range for u8"),
            (#"{"services": [{"uuid": "1800", "characteristics": [{"uuid": "2A00", "properties": ["read"]}]}]}"#,
             "services[0]: service 1800 is reserved"),
            (#"{"services": [{"uuid": "180F", "characteristcs": []}]}"#, "services[0].characteristics: is required"),
        ]
        for (index, (tree, message)) in cases.enumerated() {
            let file = directory.appendingPathComponent("tree\(index).json")
            try tree.write(to: file, atomically: true, encoding: .utf8)
            let result = try ChildProcess.run(gattway, ["serve", "--tree", file.path])
            #expect(result.status == 64, "\(tree)")
            #expect(result.output.contains(message), "\(result.output)")
        }
        let missing = try ChildProcess.run(gattway, ["serve"])
        #expect(missing.status == 64)
        #expect(missing.output.contains("--tree FILE is required"))
    }
}
