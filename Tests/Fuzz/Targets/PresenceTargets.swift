import Bluetooth
import Gateway
import JSON
import Parsers

extension FuzzTargets {
    /// Bytes as the `presence` section of config.json (`{"presence": BYTES}`), through
    /// ``GatewayConfig/parse(_:)``. Properties: no trap; a rejected file has problems, each with a
    /// message; an accepted one keeps its documented bounds (at most
    /// ``PresenceSettings/maxIdentities`` identities, unique names and keys, each name a topic
    /// level, IRKs of 16 bytes that are among the secrets, absorption 1–10, rssi_at_1m −127–0,
    /// away_after from 1 s to 365 days; `espresense` only when enabled, its room a topic level, and
    /// each identity's ESPresense id one topic level of its kind's form); and the matcher built
    /// from it resolves an address made from each of the first IRKs to that identity.
    static let presenceConfig = FuzzTarget(
        name: "presence-config",
        summary: "bytes as config.json's presence section: bounds, secrets, and the IRKs resolve their own RPAs",
        seeds: { PresenceSeeds.sections },
        run: { bytes in
            guard let config = parsedConfig(Array(#"{"presence": "#.utf8) + bytes + [UInt8(ascii: "}")]) else {
                return
            }
            guard let presence = config.presence else {
                // Only `null` leaves the section out.
                return
            }
            checkPresence(presence, secrets: config.secrets)
            fuzzProperty(
                presence.awayAfter >= 1 && presence.awayAfter <= DurationText.maximumSeconds,
                "presence.away_after = \(presence.awayAfter)")
            fuzzProperty((1...10).contains(presence.absorption), "presence.absorption = \(presence.absorption)")
            fuzzProperty((-127...0).contains(presence.rssiAt1m), "presence.rssi_at_1m = \(presence.rssiAt1m)")
            if let espresense = presence.espresense {
                fuzzProperty(espresense.enabled, "presence.espresense kept while disabled")
                if let room = espresense.room {
                    fuzzProperty(isTopicLevel(room), "presence.espresense.room \(room) is not a topic level")
                }
                checkESPresenseIDs(presence.identities)
            }
            let matcher = PresenceMatcher(presence.identities)
            checkResolves(matcher, presence.identities)
        })

    /// Up to 64 bytes, none of them a space, a control, `/`, `+` or `#`.
    static func isTopicLevel(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && !text.unicodeScalars.contains {
                $0.value <= 0x20 || $0.value == 0x7F || "/+#".unicodeScalars.contains($0)
            }
    }

    /// Each identity's ESPresense id is one topic level of ESPresense's form for its kind.
    static func checkESPresenseIDs(_ identities: [PresenceIdentity]) {
        for identity in identities.prefix(50) {
            let id = ESPresense.id(identity.key)
            let expected: (prefix: String, count: Int)
            switch identity.key {
            case .irk: expected = ("irk:", 36)
            case .address: expected = ("known:", 18)
            case .iBeacon(_, let major, let minor): expected = ("iBeacon:", 8 + 36 + 2 + "\(major)\(minor)".count)
            case .eddystoneUID: expected = ("eddy:", 5 + 22 + 1 + 12)
            }
            fuzzProperty(
                id.hasPrefix(expected.prefix) && id.utf8.count == expected.count && isTopicLevel(id)
                    && id.dropFirst(expected.prefix.count) == id.dropFirst(expected.prefix.count).lowercased(),
                "ESPresense id \(id) of \(identity.name)")
        }
    }

    /// Bytes as the payload of `<bridge>/request/presence/identity`, given to the core's presence
    /// state (``Presence/change(_:)``) after two earlier run-time identities, the way the gateway
    /// hands it a request that parsed as an object. Properties: no trap; a refusal changes
    /// nothing; a success keeps config.json's identity, the bounds and uniqueness of
    /// `presence-config`, and resolves the new identity's own RPA when it has an IRK; no answer
    /// ever holds an IRK that was set.
    static let presenceRequest = FuzzTarget(
        name: "presence-request",
        summary: "bytes as the bridge request presence/identity: refusals change nothing, answers never hold an IRK",
        seeds: { PresenceSeeds.requests },
        run: { bytes in
            guard case .object(let members)? = try? JSONValue.parse(bytes) else { return }
            let presence = Presence(settings: PresenceSeeds.settings)
            for earlier in PresenceSeeds.earlier {
                guard case .success = presence.change(earlier) else {
                    fuzzProperty(false, "a valid earlier identity refused")
                    return
                }
            }
            let before = presence.identities
            let result = presence.change(members)
            let irks = (before + presence.identities).compactMap { identity -> String? in
                if case .irk(let irk) = identity.key { return Hex.encode(irk) }
                return nil
            }
            let answer: String
            switch result {
            case .failure(let error):
                fuzzProperty(!error.message.isEmpty, "a refusal without a message")
                fuzzProperty(presence.identities == before, "a refused request changed the identities")
                answer = error.message
            case .success(let data):
                var text: [UInt8] = []
                data.write(into: &text)
                answer = String(decoding: text, as: UTF8.self)
                fuzzProperty(
                    presence.identities.first == PresenceSeeds.settings.identities.first,
                    "config.json's identity was changed by request")
                checkPresence(PresenceSettings.with(presence.identities), secrets: nil)
                checkResolves(presence.matcher, presence.identities)
            }
            for irk in irks {
                fuzzProperty(!answer.lowercased().contains(irk), "an answer holds an IRK: \(answer)")
            }
        })

    /// Arbitrary bytes as `identities.json` in the state directory (the presence identities set
    /// at run time), read by ``Presence/load()`` at start: what a torn write, a full disk, a hand
    /// edit or anything else that can write there leaves.
    ///
    /// Properties: no trap, no hang; what is loaded passes the same bounds and uniqueness as
    /// config.json's identities and never changes config.json's; no problem reported quotes an
    /// IRK; and after one change (an identity set, as the bridge request does) the file the
    /// gateway wrote reads back, with no problem, to exactly the identities it holds.
    static let presenceFile = FuzzTarget(
        name: "presence-file",
        summary: "arbitrary bytes as the run-time presence identity file (identities.json): load, set one, read back",
        seeds: {
            [
                #"{"identities": [{"name": "watch", "irk": "00112233445566778899aabbccddeeff", "rssi_at_1m": -60}]}"#,
                #"{"identities": [{"name": "tag", "ibeacon": "FDA50693-A4E2-4FB1-AFCF-C6EB07647825:100:7"}, {"name": "k2", "address": "C4:7C:8D:6A:3E:21"}]}"#,
                #"{"identities": [7, {"name": "keys", "irk": "00112233445566778899aabbccddeeff"}, {"name": "x"}]}"#,
                #"{"identities": {}}"#,
                "",
            ].map { Array($0.utf8) }
        },
        run: { bytes in
            BindKeyFiles.with(bytes, as: Presence.fileName) { directory in
                let presence = Presence(settings: PresenceSeeds.settings, directory: directory)
                let problems = presence.load()
                fuzzProperty(
                    presence.identities.first == PresenceSeeds.settings.identities.first,
                    "the file changed config.json's identity")
                checkPresence(PresenceSettings.with(presence.identities), secrets: nil)
                for identity in presence.runtime {
                    guard case .irk(let irk) = identity.key else { continue }
                    let hex = Hex.encode(irk)
                    for problem in problems {
                        fuzzProperty(!problem.lowercased().contains(hex), "a problem quotes a loaded IRK: \(problem)")
                    }
                }
                // One change, as `bridge/request/presence/identity` makes it: the file is rewritten.
                let irk = [UInt8](repeating: bytes.first ?? 0x42, count: 16)
                let members: [(key: String, value: JSONValue)] = [
                    ("name", .string("fuzz_phone")), ("irk", .string(Hex.encode(irk))),
                ]
                guard case .success = presence.change(members) else {
                    // Only at the limit of identities, or when another identity has that IRK already.
                    fuzzProperty(
                        presence.identities.count >= PresenceSettings.maxIdentities
                            || presence.identities.contains { $0.name != "fuzz_phone" && $0.key == .irk(irk) },
                        "setting an identity failed below the limit")
                    return
                }
                let again = Presence(settings: PresenceSeeds.settings, directory: directory)
                let reread = again.load()
                fuzzProperty(reread.isEmpty, "the file the gateway wrote reads back with problems: \(reread)")
                fuzzProperty(
                    again.identities == presence.identities, "the file the gateway wrote reads back to other identities"
                )
            }
        })

    /// Bounds and uniqueness of a list of identities; with `secrets`, every IRK is among them.
    static func checkPresence(_ presence: PresenceSettings, secrets: [String]?) {
        let identities = presence.identities
        fuzzProperty(identities.count <= PresenceSettings.maxIdentities, "\(identities.count) identities")
        var names = Set<String>()
        for (index, identity) in identities.enumerated() {
            fuzzProperty(names.insert(identity.name).inserted, "two identities named \(identity.name)")
            fuzzProperty(
                !identity.name.isEmpty && identity.name.utf8.count <= 64
                    && !identity.name.unicodeScalars.contains { $0.value <= 0x20 || "/+#".unicodeScalars.contains($0) },
                "identity name \(identity.name) is not a topic level")
            fuzzProperty(
                !identities[..<index].contains { $0.key == identity.key }, "two identities of one device")
            if let rssi = identity.rssiAt1m { fuzzProperty((-127...0).contains(rssi), "rssi_at_1m = \(rssi)") }
            switch identity.key {
            case .irk(let irk):
                fuzzProperty(irk.count == 16, "an IRK of \(irk.count) bytes")
                if let secrets { fuzzProperty(secrets.contains(Hex.encode(irk)), "an IRK that is not a secret") }
            case .iBeacon(let uuid, _, _): fuzzProperty(uuid.count == 16, "an iBeacon UUID of \(uuid.count) bytes")
            case .eddystoneUID(let namespace, let instance):
                fuzzProperty(namespace.count == 10 && instance.count == 6, "an Eddystone UID of the wrong size")
            case .address: break
            }
        }
    }

    /// An address made from each of the first three IRKs resolves to its identity.
    static func checkResolves(_ matcher: PresenceMatcher, _ identities: [PresenceIdentity]) {
        var checked = 0
        for (index, identity) in identities.enumerated() where checked < 3 {
            guard case .irk(let irk) = identity.key, let cipher = AESBlockCipher(key: irk),
                let address = RandomAddressHash.address(cipher, random: UInt32(index) &* 2_654_435_761)
            else { continue }
            checked += 1
            let match = matcher.identify(address, type: .random, advertisement: AdvertisementData())
            // Two IRKs may (once in 2^24 per pair) both claim an address: the first one tried wins.
            if let match, match.identity != index, case .irk(let other) = identities[match.identity].key,
                let otherCipher = AESBlockCipher(key: other), RandomAddressHash.matches(address, otherCipher)
            {
                continue
            }
            fuzzProperty(
                match?.identity == index,
                "\(identity.name)'s own RPA \(address) resolved to \(String(describing: match))")
        }
    }
}

extension PresenceSettings {
    /// Settings that hold `identities` (for the bounds check of a request's outcome).
    fileprivate static func with(_ identities: [PresenceIdentity]) -> PresenceSettings {
        var settings = PresenceSettings()
        settings.identities = identities
        return settings
    }
}

/// Seeds of the presence targets: docs/config.md's presence blocks and hand-written ones.
enum PresenceSeeds {
    static let irk = "ec0234a357c8ad05341010a60a397d9b"

    static let sections: [[UInt8]] = {
        var seeds = [
            #"{}"#,
            #"{"identities": [{"name": "phone", "irk": "\#(irk)", "rssi_at_1m": -62}], "away_after": "2m"}"#,
            #"{"identities": [{"name": "keys", "address": "C4:7C:8D:6A:3E:21"}, {"name": "tag", "ibeacon": "FDA50693-A4E2-4FB1-AFCF-C6EB07647825:100:7"}, {"name": "eddy", "eddystone_uid": "EDD1EBEAC04E5DEFA017:0BDB87539B67"}]}"#,
            #"{"absorption": 2.7, "rssi_at_1m": -61, "room": "kitchen", "adapter_rooms": {"hci0": "hall"}}"#,
            #"{"identities": [{"name": "a", "irk": "\#(irk)"}, {"name": "a", "irk": "00112233445566778899aabbccddeeff"}]}"#,
            #"{"identities": [{"name": "phone", "irk": "\#(irk)"}], "espresense": {"enabled": true, "room": "kitchen"}}"#,
            #"{"espresense": {"enabled": false, "room": "a/b"}}"#,
            #"{"espresense": {}, "room": "hall"}"#,
        ].map { Array($0.utf8) }
        for path in FixtureFiles.repositoryFiles(in: "docs", suffix: ".md") {
            for block in FixtureFiles.markdownJSONBlocks(path) {
                guard case .object(let members)? = try? JSONValue.parse(block),
                    let section = members.first(where: {
                        $0.key == "presence"
                    })
                else { continue }
                var bytes: [UInt8] = []
                section.value.write(into: &bytes)
                seeds.append(bytes)
            }
        }
        return seeds
    }()

    static let settings: PresenceSettings = {
        var settings = PresenceSettings()
        settings.identities = [
            PresenceIdentity(name: "keys", key: .address(BluetoothAddress(rawValue: 0xC47C_8D6A_3E21)))
        ]
        return settings
    }()

    static let earlier: [[(key: String, value: JSONValue)]] = [
        [("name", .string("watch")), ("irk", .string("00112233445566778899aabbccddeeff"))],
        [("name", .string("tag")), ("ibeacon", .string("FDA50693-A4E2-4FB1-AFCF-C6EB07647825:100:7"))],
    ]

    static let requests: [[UInt8]] = [
        #"{"name": "phone", "irk": "\#(irk)", "transaction": "t1"}"#,
        #"{"name": "watch", "irk": "\#(irk)", "rssi_at_1m": -64}"#,
        #"{"name": "phone", "irk": "00112233445566778899aabbccddeeff"}"#,
        #"{"name": "watch", "remove": true}"#,
        #"{"name": "keys", "remove": true}"#,
        #"{"name": "keys", "address": "C4:7C:8D:6A:3E:22"}"#,
        #"{"name": "eddy", "eddystone_uid": "EDD1EBEAC04E5DEFA017:0BDB87539B67", "remove": false}"#,
        #"{"name": "x", "irk": "ec02", "address": "zz"}"#,
    ].map { Array($0.utf8) }
}
