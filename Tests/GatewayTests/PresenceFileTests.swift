import Bluetooth
import Foundation
import Gateway
import JSON
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Run-time presence identities kept in `identities.json` in the state directory (docs/config.md,
/// "Identities at run time"): set by request, there after a restart, never quoted in a log line.
@Suite("Presence: run-time identities kept in identities.json")
struct PresenceFileTests {
    static let config = PresenceRequestTests.config

    func started(_ directory: String?, config: String = PresenceFileTests.config, logger: GatewayLogger = .none)
        async throws -> Harness
    {
        let harness = try Harness(config, logger: logger, stateDirectory: directory)
        try await harness.start()
        return harness
    }

    func reply(_ harness: Harness, _ payload: String) async -> JSONValue? {
        let responses = await harness.command(
            PresenceRequestTests.request, payload, responseTopic: PresenceRequestTests.response)
        return responses.last.flatMap { json($0.payloadText) }
    }

    @Test("set by request: the file is written 0600, says persisted, and a restarted gateway resolves the phone")
    func keptAcrossRestart() async throws {
        let directory = BindKeyTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/identities.json"
        let first = try await started(directory)
        let set = await reply(first, #"{"name": "phone", "irk": "\#(SpecSample.irkText)", "rssi_at_1m": -61}"#)
        #expect(
            set?["status"] == .string("ok") && set?["data"]?["persisted"] == .bool(true), "\(String(describing: set))")
        var status = stat()
        #expect(stat(path, &status) == 0 && status.st_mode & 0o777 == 0o600)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        guard case .array(let entries)? = json(text)?["identities"], entries.count == 1 else {
            Issue.record("not one identity in the file: \(text)")
            return
        }
        #expect(entries[0]["name"] == .string("phone") && entries[0]["rssi_at_1m"] == .number(-61), "\(text)")

        let capture = LogCapture()
        let second = try await started(directory, logger: capture.logger)
        #expect(await second.gateway.presenceIdentityNames == ["keys", "phone"])
        #expect(await second.gateway.presenceIdentity(of: PresenceRequestTests.phoneReport) == "phone")
        #expect(capture.all.contains { $0.contains("presence: 1 identities set at run time, from \(path)") })
        #expect(!capture.all.joined().lowercased().contains(SpecSample.irkText))

        // Removed by request: gone from the file, and after the next restart.
        let removed = await reply(second, #"{"name": "phone", "remove": true}"#)
        #expect(removed?["data"]?["identity"] == .string("removed") && removed?["data"]?["persisted"] == .bool(true))
        let third = try await started(directory)
        #expect(await third.gateway.presenceIdentityNames == ["keys"])
        #expect(await third.gateway.presenceIdentity(of: PresenceRequestTests.phoneReport) == nil)
    }

    @Test(
        "an identities.json that is not one, or with entries that are not identities now, is reported without quoting it and never a crash",
        arguments: [
            ("{", "is not a presence identity file"),
            (#"{"identities": {}}"#, "is not a presence identity file"),
            (#"{"identities": [7, {"name": "keys", "irk": "\#(SpecSample.irkText)"}]}"#, "2 entries skipped"),
            (
                #"{"identities": [{"name": "a", "irk": "\#(SpecSample.irkText)"}, {"name": "b", "irk": "\#(SpecSample.irkText)"}]}"#,
                "1 entry skipped"
            ),
            (
                #"{"identities": [{"name": "a", "irk": "\#(SpecSample.irkText)"}, {"name": "a", "address": "11:22:33:44:55:66"}]}"#,
                "1 entry skipped"
            ),
        ])
    func badFile(_ contents: String, _ problem: String) async throws {
        let directory = BindKeyTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/identities.json"
        try contents.write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        let capture = LogCapture()
        let harness = try await started(directory, logger: capture.logger)
        #expect(
            capture.all.contains { $0.hasPrefix("<4>") && $0.contains("identities.json") && $0.contains(problem) },
            "\(capture.all)")
        #expect(!capture.all.joined().lowercased().contains(SpecSample.irkText), "the IRK in the log")
        // The valid first entry is kept (when there is one); config.json's "keys" always.
        let names = await harness.gateway.presenceIdentityNames
        #expect(names.first == "keys" && names.count <= 2, "\(names)")
        // The next change replaces the file with what the gateway holds.
        #expect(await reply(harness, #"{"name": "watch", "address": "11:22:33:44:55:77"}"#)?["status"] == .string("ok"))
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(json(text)?["identities"] != nil, "\(text)")
    }

    @Test("an identities.json others may read is warned about; one that cannot be written answers an error, unchanged")
    func modeAndUnwritable() async throws {
        let directory = BindKeyTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/identities.json"
        try #"{"identities": [{"name": "phone", "irk": "\#(SpecSample.irkText)"}]}"#.write(
            toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o644)
        let capture = LogCapture()
        let harness = try await started(directory, logger: capture.logger)
        #expect(capture.all.contains { $0.contains("identities.json is readable by others") })
        #expect(await harness.gateway.presenceIdentity(of: PresenceRequestTests.phoneReport) == "phone")

        let missing = try await started(
            directory + "/missing",  // never created
            config:
                #"{"store_and_forward": {"enabled": false}, "presence": {"identities": [{"name": "keys", "address": "C4:7C:8D:6A:3E:21"}]}}"#
        )
        let answer = await reply(missing, #"{"name": "phone", "irk": "\#(SpecSample.irkText)"}"#)
        #expect(answer?["status"] == .string("error"), "\(String(describing: answer))")
        if case .string(let text)? = answer?["error"] {
            #expect(text.contains("identities.json") && text.contains("the identities are unchanged"), "\(text)")
        }
        #expect(await missing.gateway.presenceIdentityNames == ["keys"])
    }
}
