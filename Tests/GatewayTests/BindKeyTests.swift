import Bluetooth
import Foundation
import Gateway
import GatewayFakes
import JSON
import Testing

@Suite("Bind keys at run time: bridge/request/device/bindkey, key_missing and key_wrong")
struct BindKeyTests {
    /// A real BTHome v2 encrypted frame (temperature 25.06 °C) and its key.
    static let sensor = address("54:48:E6:8F:80:A5")
    static let name = "5448E68F80A5"
    static let key = "231d39c1d7cc1ab1aee224cd096db932"
    static let wrongKey = "00112233445566778899aabbccddeeff"
    static let frame: [UInt8] = [
        0x41, 0xa4, 0x72, 0x66, 0xc9, 0x5f, 0x73, 0x00, 0x11, 0x22, 0x33, 0x78, 0x23, 0x72, 0x14,
    ]
    static let request = "gattway/bridge/request/device/bindkey"
    static let response = "gattway/bridge/response/device/bindkey"
    /// An advertisement-only rule by service: the sensor is known by its address once seen.
    static let config = #"{"devices": [{"match": {"services": ["FCD2"]}}]}"#

    static func temporaryDirectory() -> String {
        let path = NSTemporaryDirectory() + "gattway-keys-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    func started(_ config: String = BindKeyTests.config, stateDirectory: String? = nil, logger: GatewayLogger = .none)
        async throws -> Harness
    {
        let harness = try Harness(config, logger: logger, stateDirectory: stateDirectory)
        try await harness.start()
        return harness
    }

    /// Sends the encrypted frame `count` times.
    func advertise(_ harness: Harness, count: Int = 1) async {
        for _ in 0..<count { await harness.gateway.handle(bthome(Self.sensor, payload: Self.frame)) }
        await harness.settle()
    }

    /// The reply to one bind key request.
    func bindKey(_ harness: Harness, _ payload: String) async -> JSONValue? {
        let before = harness.mqtt.messages(on: Self.response).count
        let responses = await harness.command(Self.request, payload, responseTopic: Self.response)
        #expect(responses.count == before + 1, "exactly one response to \(payload)")
        return responses.last.flatMap { json($0.payloadText) }
    }

    func events(_ harness: Harness, _ type: String) -> [JSONValue] {
        harness.mqtt.payloads(on: "gattway/bridge/event").compactMap(json).filter { $0["type"] == .string(type) }
    }

    func temperatures(_ harness: Harness, _ name: String = BindKeyTests.name) -> [Double] {
        harness.mqtt.payloads(on: "gattway/" + name).compactMap { text in
            if case .number(let value)? = json(text)?["temperature"] { return value }
            return nil
        }
    }

    @Test(
        "an encrypted frame without a key: one key_missing event and a count per frame; a key set at run time decodes the next"
    )
    func missingThenSet() async throws {
        let capture = LogCapture()
        let harness = try await started(logger: capture.logger)
        await advertise(harness, count: 3)
        let missing = events(harness, "key_missing")
        #expect(missing.count == 1)
        #expect(missing.first?["data"]?["name"] == .string(Self.name))
        #expect(missing.first?["data"]?["address"] == .string("54:48:E6:8F:80:A5"))
        #expect(missing.first?["data"]?["error"] != nil)
        #expect(await harness.gateway.counters.dropped.keyMissing == 3)
        #expect(await harness.gateway.counters.parseErrors == 0, "a missing key is not a malformed payload")
        #expect(capture.all.filter { $0.contains("key_missing") }.count == 1, "one log line, not one per frame")
        #expect(temperatures(harness).isEmpty)

        let reply = await bindKey(harness, #"{"device": "\#(Self.name)", "key": "\#(Self.key)", "transaction": "k1"}"#)
        #expect(reply?["status"] == .string("ok"))
        #expect(reply?["transaction"] == .string("k1"))
        #expect(reply?["data"]?["bindkey"] == .string("set"))
        #expect(reply?["data"]?["address"] == .string("54:48:E6:8F:80:A5"))
        #expect(reply?["data"]?["persisted"] == .bool(false), "no state directory: memory only")
        await advertise(harness)
        #expect(temperatures(harness) == [25.06])
        #expect(events(harness, "key_missing").count == 1)
        #expect(await harness.gateway.counters.dropped.keyMissing == 3)
        // The key never leaves the gateway: not in a response, an event, a state, a log line.
        for message in harness.mqtt.published {
            #expect(!message.payloadText.lowercased().contains(Self.key), "\(message.topic) carries the key")
        }
        #expect(!capture.all.contains { $0.lowercased().contains(Self.key) })
    }

    @Test(
        "a wrong key: one key_wrong event however many frames, each counted; the right key decodes; a wrong one again reports again"
    )
    func wrongKey() async throws {
        let harness = try await started()
        // By address, before the device was seen: the rule may match it.
        let reply = await bindKey(harness, #"{"device": "54:48:e6:8f:80:a5", "key": "\#(Self.wrongKey)"}"#)
        #expect(reply?["status"] == .string("ok"), "\(String(describing: reply))")
        await advertise(harness, count: 4)
        #expect(events(harness, "key_wrong").count == 1)
        #expect(events(harness, "key_wrong").first?["data"]?["name"] == .string(Self.name))
        #expect(events(harness, "key_missing").isEmpty)
        #expect(await harness.gateway.counters.dropped.keyWrong == 4)
        #expect(temperatures(harness).isEmpty)

        #expect(
            await bindKey(harness, #"{"device": "\#(Self.name)", "key": "\#(Self.key.uppercased())"}"#)?["status"]
                == .string("ok"))
        await advertise(harness, count: 2)
        #expect(temperatures(harness).first == 25.06)
        #expect(await harness.gateway.counters.dropped.keyWrong == 4)

        #expect(
            await bindKey(harness, #"{"device": "\#(Self.name)", "key": "\#(Self.wrongKey)"}"#)?["status"]
                == .string("ok"))
        await advertise(harness, count: 2)
        #expect(events(harness, "key_wrong").count == 2, "the key changed: the problem is news again")
        #expect(await harness.gateway.counters.dropped.keyWrong == 6)
    }

    @Test("a key is cleared with null or \"\": frames are undecodable again and key_missing is reported anew")
    func clear() async throws {
        let harness = try await started()
        await advertise(harness)
        #expect(events(harness, "key_missing").count == 1)
        for clearing in ["null", #""""#] {
            #expect(
                await bindKey(harness, #"{"device": "\#(Self.name)", "key": "\#(Self.key)"}"#)?["status"]
                    == .string("ok"))
            await advertise(harness)
            let reply = await bindKey(harness, #"{"device": "\#(Self.name)", "key": \#(clearing)}"#)
            #expect(reply?["status"] == .string("ok"))
            #expect(reply?["data"]?["bindkey"] == .string("cleared"))
            await advertise(harness, count: 2)
        }
        #expect(temperatures(harness).count == 2)
        #expect(events(harness, "key_missing").count == 3)
        #expect(await harness.gateway.counters.dropped.keyMissing == 5)
    }

    @Test("a frame that decrypts after a key_wrong (same key) makes the next failure news again")
    func decryptResets() async throws {
        let harness = try await started()
        #expect(
            await bindKey(harness, #"{"device": "54:48:E6:8F:80:A5", "key": "\#(Self.key)"}"#)?["status"]
                == .string("ok"))
        var damaged = Self.frame
        damaged[damaged.count - 1] ^= 0xFF  // the MIC no longer holds
        for payload in [damaged, damaged, Self.frame, damaged, damaged] {
            await harness.gateway.handle(bthome(Self.sensor, payload: payload))
        }
        await harness.settle()
        #expect(events(harness, "key_wrong").count == 2)
        #expect(await harness.gateway.counters.dropped.keyWrong == 4)
        #expect(temperatures(harness) == [25.06])
    }

    @Test("keys persist in bindkeys.json (mode 0600) in the state directory and a new gateway reads them")
    func persisted() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/bindkeys.json"
        do {
            let harness = try await started(stateDirectory: directory)
            let reply = await bindKey(harness, #"{"device": "54:48:E6:8F:80:A5", "key": "\#(Self.key)"}"#)
            #expect(reply?["status"] == .string("ok"))
            #expect(reply?["data"]?["persisted"] == .bool(true))
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
            await harness.stop()
        }
        let harness = try await started(stateDirectory: directory)
        await advertise(harness)
        #expect(temperatures(harness) == [25.06])
        #expect(events(harness, "key_missing").isEmpty)
        // Cleared: gone from the file too.
        #expect(await bindKey(harness, #"{"device": "\#(Self.name)", "key": null}"#)?["status"] == .string("ok"))
        await harness.stop()
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!text.contains(Self.key))
        let again = try await started(stateDirectory: directory)
        await advertise(again)
        #expect(events(again, "key_missing").count == 1)
    }

    @Test(
        "a bindkeys.json that is not one is reported and ignored, never a crash; the next change replaces it",
        arguments: [
            "{", #"{"bindkeys": []}"#, #"{"bindkeys": {"54:48:E6:8F:80:A5": 7, "nope": "00"}}"#, "\u{0}\u{1}",
        ])
    func corruptFile(_ contents: String) async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/bindkeys.json"
        try contents.write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        let capture = LogCapture()
        let harness = try await started(stateDirectory: directory, logger: capture.logger)
        #expect(capture.all.contains { $0.hasPrefix("<4>") && $0.contains("bindkeys.json") }, "\(capture.all)")
        await advertise(harness)
        #expect(events(harness, "key_missing").count == 1)
        #expect(
            await bindKey(harness, #"{"device": "\#(Self.name)", "key": "\#(Self.key)"}"#)?["status"] == .string("ok"))
        await advertise(harness)
        #expect(temperatures(harness) == [25.06])
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(json(text)?["bindkeys"]?["54:48:E6:8F:80:A5"] == .string(Self.key))
    }

    @Test("a bindkeys.json larger than 256 KiB is not read at all (reported, ignored)")
    func oversizeFile() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/bindkeys.json"
        // Valid JSON with the right key, after 300,000 spaces.
        try (String(repeating: " ", count: 300_000) + #"{"bindkeys": {"54:48:E6:8F:80:A5": "\#(Self.key)"}}"#)
            .write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        let capture = LogCapture()
        let harness = try await started(stateDirectory: directory, logger: capture.logger)
        #expect(capture.all.contains { $0.hasPrefix("<4>") && $0.contains("at most 262144 bytes") }, "\(capture.all)")
        await advertise(harness)
        #expect(events(harness, "key_missing").count == 1)
        #expect(temperatures(harness).isEmpty)
    }

    @Test("when bindkeys.json cannot be written the request answers an error and the key is unchanged")
    func unwritable() async throws {
        let directory = Self.temporaryDirectory() + "/missing"  // never created
        let harness = try await started(
            #"{"store_and_forward": {"enabled": false}, "devices": [{"match": {"services": ["FCD2"]}}]}"#,
            stateDirectory: directory)
        let reply = await bindKey(harness, #"{"device": "54:48:E6:8F:80:A5", "key": "\#(Self.key)"}"#)
        #expect(reply?["status"] == .string("error"))
        if case .string(let text)? = reply?["error"] {
            #expect(text.contains("bindkeys.json") && text.contains("the key is unchanged"), "\(text)")
        } else {
            Issue.record("no error text")
        }
        await advertise(harness)
        #expect(events(harness, "key_missing").count == 1)
        #expect(temperatures(harness).isEmpty)
    }

    @Test("a bindkeys.json others may read is warned about")
    func looseMode() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/bindkeys.json"
        try #"{"bindkeys": {"54:48:E6:8F:80:A5": "\#(Self.key)"}}"#.write(
            toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o644)
        let capture = LogCapture()
        let harness = try await started(stateDirectory: directory, logger: capture.logger)
        #expect(capture.all.contains { $0.contains("readable by others") })
        await advertise(harness)
        #expect(temperatures(harness) == [25.06], "the key is used all the same")
    }

    @Test("a key in config.json wins: a request to set one for its device is refused, and it decodes with its own")
    func configKeyWins() async throws {
        let harness = try await started(
            #"{"devices": [{"match": {"address": "54:48:E6:8F:80:A5"}, "name": "th", "bindkey": "\#(Self.key)"}]}"#)
        for device in ["th", "54:48:E6:8F:80:A5"] {
            let reply = await bindKey(harness, #"{"device": "\#(device)", "key": "\#(Self.wrongKey)"}"#)
            #expect(reply?["status"] == .string("error"))
            if case .string(let text)? = reply?["error"] {
                #expect(text.contains("config.json"))
            } else {
                Issue.record("no error text")
            }
        }
        await advertise(harness)
        #expect(temperatures(harness, "th") == [25.06])
    }

    @Test(
        "a runtime key for a device whose rule is not known yet is kept, but its rule's config key wins at decode time")
    func configKeyWinsAtDecode() async throws {
        let harness = try await started(
            #"{"devices": [{"match": {"services": ["FCD2"]}, "bindkey": "\#(Self.key)"}]}"#)
        let reply = await bindKey(harness, #"{"device": "54:48:E6:8F:80:A5", "key": "\#(Self.wrongKey)"}"#)
        #expect(reply?["status"] == .string("ok"))
        await advertise(harness)
        #expect(temperatures(harness) == [25.06])
        #expect(events(harness, "key_wrong").isEmpty)
        // Once the device is known, its rule is: a second request is refused.
        #expect(
            await bindKey(harness, #"{"device": "\#(Self.name)", "key": "\#(Self.wrongKey)"}"#)?["status"]
                == .string("error"))
    }

    @Test(
        "invalid requests answer an error and store nothing",
        arguments: [
            "not json", "[]", #"{}"#, #"{"key": "\#(BindKeyTests.key)"}"#,
            #"{"device": 7, "key": "\#(BindKeyTests.key)"}"#,
            #"{"device": "nobody", "key": "\#(BindKeyTests.key)"}"#,
            #"{"device": "C4:D3:8C:12:4A:5F", "key": "\#(BindKeyTests.key)"}"#,
            #"{"device": "54:48:E6:8F:80:A5"}"#,
            #"{"device": "54:48:E6:8F:80:A5", "key": 12}"#,
            #"{"device": "54:48:E6:8F:80:A5", "key": true}"#,
            #"{"device": "54:48:E6:8F:80:A5", "key": ["\#(BindKeyTests.key)"]}"#,
            #"{"device": "54:48:E6:8F:80:A5", "key": "231d39c1d7cc1ab1aee224cd096db9"}"#,
            #"{"device": "54:48:E6:8F:80:A5", "key": "231d39c1d7cc1ab1aee224cd096db93200"}"#,
            #"{"device": "54:48:E6:8F:80:A5", "key": "231d39c1d7cc1ab1aee224cd096db93g"}"#,
            #"{"device": "54:48:E6:8F:80:A5", "key": "231d39c1d7cc1ab1aee224cd"}"#,
            #"{"device": "54:48:E6:8F:80:A5", "key": "   "}"#,
        ])
    func invalid(_ payload: String) async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Only the sensor's address may match (C4:D3:… is named by no rule).
        let harness = try await started(
            #"{"devices": [{"match": {"address_prefix": "54:48:E6"}}]}"#, stateDirectory: directory)
        let reply = await bindKey(harness, payload)
        #expect(reply?["status"] == .string("error"), "\(payload)")
        if case .string(let text)? = reply?["error"] {
            #expect(!text.lowercased().contains(Self.key))
        } else {
            Issue.record("no error text for \(payload)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory + "/bindkeys.json"))
        await advertise(harness)
        #expect(events(harness, "key_missing").count == 1)
        #expect(temperatures(harness).isEmpty)
        #expect(await harness.gateway.counters.commandErrors == 1)
    }

    @Test("the file is rewritten at most 10 times at once, then once a second; a refused change keeps the old key")
    func writeRateLimit() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let harness = try await started(stateDirectory: directory)
        var statuses: [JSONValue?] = []
        for index in 0..<11 {
            let key = index % 2 == 0 ? Self.key : Self.wrongKey
            statuses.append(await bindKey(harness, #"{"device": "54:48:E6:8F:80:A5", "key": "\#(key)"}"#)?["status"])
        }
        #expect(statuses.filter { $0 == .string("ok") }.count == 10)
        #expect(statuses.last == .string("error"))
        await advertise(harness)
        #expect(events(harness, "key_wrong").count == 1, "the 10th change (the wrong key) stands")
        await harness.advance(1)
        #expect(
            await bindKey(harness, #"{"device": "54:48:E6:8F:80:A5", "key": "\#(Self.key)"}"#)?["status"]
                == .string("ok"))
        await advertise(harness)
        #expect(temperatures(harness) == [25.06])
    }

    @Test("bridge/health counts dropped.key_missing and dropped.key_wrong")
    func health() async throws {
        let harness = try await started()
        await advertise(harness, count: 2)
        let payload = await harness.gateway.healthPayload
        #expect(payload["dropped"]?["key_missing"] == .number(2))
        #expect(payload["dropped"]?["key_wrong"] == .number(0))
    }
}
