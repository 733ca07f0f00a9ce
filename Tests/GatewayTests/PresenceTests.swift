import Bluetooth
import Gateway
import JSON
import Parsers
import Testing

/// The Core spec's sample data for `ah` (Vol 3 Part H, Appendix D.7, "ah random address hash
/// functions"): IRK ec0234a3 57c8ad05 341010a6 0a397d9b (most significant byte first), prand
/// 708194, hash 0dfbaa; so 70:81:94:0D:FB:AA is a resolvable private address of that IRK.
enum SpecSample {
    static let irkText = "ec0234a357c8ad05341010a60a397d9b"
    static let irk: [UInt8] = [
        0xec, 0x02, 0x34, 0xa3, 0x57, 0xc8, 0xad, 0x05, 0x34, 0x10, 0x10, 0xa6, 0x0a, 0x39, 0x7d, 0x9b,
    ]
    static let prand: UInt32 = 0x70_8194
    static let hash: UInt32 = 0x0d_fbaa
    static let rpa = BluetoothAddress(rawValue: 0x7081_940D_FBAA)
}

/// Ten IRKs: the spec's last, nine others before it.
private func tenIdentities() -> [PresenceIdentity] {
    (0..<9).map { index in
        PresenceIdentity(name: "other\(index)", key: .irk([UInt8](repeating: UInt8(index + 1), count: 16)))
    } + [PresenceIdentity(name: "phone", key: .irk(SpecSample.irk))]
}

@Suite("Presence: ah, resolvable private addresses and the resolver's cache")
struct PresenceResolutionTests {
    @Test("ah of the spec's sample IRK over prand 708194 is 0dfbaa")
    func specSample() throws {
        let cipher = try #require(AESBlockCipher(key: SpecSample.irk))
        #expect(RandomAddressHash.ah(cipher, prand: SpecSample.prand) == SpecSample.hash)
        #expect(RandomAddressHash.matches(SpecSample.rpa, cipher))
        // One bit off in the hash or in prand: no match.
        #expect(!RandomAddressHash.matches(BluetoothAddress(rawValue: 0x7081_940D_FBAB), cipher))
        #expect(!RandomAddressHash.matches(BluetoothAddress(rawValue: 0x7081_950D_FBAA), cipher))
        // The reused context gives the same block as a fresh one each time (AESECB).
        let block: [UInt8] = [UInt8](repeating: 0, count: 13) + [0x70, 0x81, 0x94]
        #expect(cipher.encrypt(block) == AESECB.encrypt(key: SpecSample.irk, plaintext: block))
        #expect(cipher.encrypt(block) == cipher.encrypt(block))
        #expect(AESBlockCipher(key: [1, 2, 3]) == nil)
        #expect(cipher.encrypt([0]) == nil)
    }

    @Test("an address made from an IRK resolves to it, with top bits 01")
    func madeAddresses() throws {
        let cipher = try #require(AESBlockCipher(key: SpecSample.irk))
        for random: UInt32 in [0, 1, 0x3F_FFFF, 0x12_3456, 0xFFFF_FFFF] {
            let address = try #require(RandomAddressHash.address(cipher, random: random))
            #expect(address.rawValue >> 46 == 0b01)
            #expect(AddressKind(address, type: .random) == .resolvablePrivate)
            #expect(RandomAddressHash.matches(address, cipher))
        }
    }

    @Test("only random addresses with top bits 01 are resolvable private ones")
    func classification() {
        let rpa = SpecSample.rpa
        #expect(AddressKind(rpa, type: .random) == .resolvablePrivate)
        #expect(AddressKind(rpa, type: .public) == .publicAddress, "a public address with top bits 01 is public")
        #expect(AddressKind(rpa, type: nil) == nil, "the type unknown: not tried")
        #expect(AddressKind(BluetoothAddress(rawValue: 0xC000_0000_0001), type: .random) == .staticRandom)
        #expect(AddressKind(BluetoothAddress(rawValue: 0x3FFF_FFFF_FFFF), type: .random) == .nonResolvablePrivate)
        #expect(AddressKind(BluetoothAddress(rawValue: 0x8000_0000_0000), type: .random) == .reserved)

        let matcher = PresenceMatcher([PresenceIdentity(name: "phone", key: .irk(SpecSample.irk))])
        let advertisement = AdvertisementData(rssi: -60)
        #expect(matcher.identify(rpa, type: .random, advertisement: advertisement)?.identity == 0)
        #expect(matcher.identify(rpa, type: .public, advertisement: advertisement) == nil)
        #expect(matcher.identify(rpa, type: nil, advertisement: advertisement) == nil)
        #expect(matcher.resolver.aesBlocks == 1, "only the random RPA was tried")
    }

    @Test("a known RPA costs one AES run per IRK tried once, then look-ups; an unknown one is tried once")
    func cache() throws {
        let matcher = PresenceMatcher(tenIdentities())
        let resolver = matcher.resolver
        let advertisement = AdvertisementData(rssi: -70)
        for _ in 0..<1000 {
            #expect(matcher.identify(SpecSample.rpa, type: .random, advertisement: advertisement)?.identity == 9)
        }
        // The phone's IRK is the tenth: the first report tried all ten, the 999 others none.
        #expect(resolver.aesBlocks == 10 && resolver.tried == 1 && resolver.resolved == 1)
        #expect(resolver.lookups == 1000 && resolver.hits == 999)

        let stranger = try #require(AESBlockCipher(key: [UInt8](repeating: 0xAB, count: 16)))
        let unknown = try #require(RandomAddressHash.address(stranger, random: 0x2222))
        for _ in 0..<1000 {
            #expect(matcher.identify(unknown, type: .random, advertisement: advertisement) == nil)
        }
        #expect(resolver.aesBlocks == 20 && resolver.tried == 2 && resolver.resolved == 1)
        #expect(resolver.cached == 2)
    }

    @Test("a flood of made-up RPAs keeps the cache within its capacity, counts evictions, and the phone still resolves")
    func flood() {
        let matcher = PresenceMatcher(tenIdentities(), cacheCapacity: 64)
        let resolver = matcher.resolver
        let advertisement = AdvertisementData(rssi: -70)
        #expect(matcher.identify(SpecSample.rpa, type: .random, advertisement: advertisement)?.identity == 9)
        for index in 0..<10_000 {
            let made = BluetoothAddress(rawValue: 0x4000_0000_0000 | UInt64(index) << 24 | UInt64(index &* 2_654_435))
            _ = matcher.identify(made, type: .random, advertisement: advertisement)
            #expect(resolver.cached <= 64)
        }
        #expect(resolver.tried == 10_001)
        #expect(resolver.aesBlocks == 10 + 10_000 * 10, "each made-up address tried against every IRK once")
        #expect(resolver.evicted == 10_001 - resolver.cached)
        #expect(matcher.identify(SpecSample.rpa, type: .random, advertisement: advertisement)?.identity == 9)
    }

    @Test("fixed addresses, iBeacons and Eddystone UIDs are identities too, with their advertised power")
    func nonRotating() {
        let uuid: [UInt8] = [
            0xFD, 0xA5, 0x06, 0x93, 0xA4, 0xE2, 0x4F, 0xB1, 0xAF, 0xCF, 0xC6, 0xEB, 0x07, 0x64, 0x78, 0x25,
        ]
        let namespace: [UInt8] = [0xED, 0xD1, 0xEB, 0xEA, 0xC0, 0x4E, 0x5D, 0xEF, 0xA0, 0x17]
        let instance: [UInt8] = [0x0B, 0xDB, 0x87, 0x53, 0x9B, 0x67]
        let matcher = PresenceMatcher([
            PresenceIdentity(name: "keys", key: .address(BluetoothAddress(rawValue: 0xC47C_8D6A_3E21))),
            PresenceIdentity(name: "tag", key: .iBeacon(uuid: uuid, major: 100, minor: 7)),
            PresenceIdentity(name: "eddy", key: .eddystoneUID(namespace: namespace, instance: instance)),
        ])
        let somewhere = BluetoothAddress(rawValue: 0x1122_3344_5566)
        let keys = matcher.identify(
            BluetoothAddress(rawValue: 0xC47C_8D6A_3E21), type: .public, advertisement: AdvertisementData(txPower: 4))
        #expect(keys == PresenceMatcher.Match(identity: 0, power: .atSource(4)))
        // iBeacon: 02 15, UUID, major 100, minor 7, measured power -65 (0xBF).
        let beacon = [0x02, 0x15] + uuid + [0x00, 0x64, 0x00, 0x07, 0xBF]
        let tag = matcher.identify(
            somewhere, type: .random, advertisement: AdvertisementData(manufacturerData: [0x004C: beacon]))
        #expect(tag == PresenceMatcher.Match(identity: 1, power: .atOneMetre(-65)))
        var otherMinor = beacon
        otherMinor[21] = 0x08
        #expect(
            matcher.identify(
                somewhere, type: .random, advertisement: AdvertisementData(manufacturerData: [0x004C: otherMinor]))
                == nil)
        // Eddystone-UID: frame 00, TX power -20 at 0 m (0xEC), namespace, instance, 2 reserved.
        let frame = [0x00, 0xEC] + namespace + instance + [0, 0]
        let eddy = matcher.identify(
            somewhere, type: .random,
            advertisement: AdvertisementData(serviceData: [BluetoothUUID(0xFEAA): frame]))
        #expect(eddy == PresenceMatcher.Match(identity: 2, power: .atSource(-20)))
        #expect(
            matcher.identify(
                somewhere, type: .random,
                advertisement: AdvertisementData(serviceData: [BluetoothUUID(0xFEAA): Array(frame.prefix(17))])) == nil,
            "a short frame is no match")
    }
}

@Suite("Presence: the distance model and RSSI smoothing")
struct PresenceDistanceTests {
    /// Worked by hand from distance = 10 ^ ((rssi_at_1m − rssi) / (10 × absorption)).
    @Test("path-loss distance, worked examples")
    func distance() {
        func near(_ value: Double, _ expected: Double) -> Bool { abs(value - expected) < 1e-6 }
        // At the RSSI of 1 m: 10^0 = 1 m.
        #expect(near(PathLoss.distance(rssi: -59, rssiAt1m: -59, absorption: 3), 1))
        // 30 dB weaker, absorption 3: 10^(30/30) = 10 m.
        #expect(near(PathLoss.distance(rssi: -89, rssiAt1m: -59, absorption: 3), 10))
        // 15 dB weaker: 10^(15/30) = 10^0.5 = 3.162278 m.
        #expect(near(PathLoss.distance(rssi: -74, rssiAt1m: -59, absorption: 3), 3.16227766))
        // Free space (2): 20 dB weaker is 10^(20/20) = 10 m.
        #expect(near(PathLoss.distance(rssi: -79, rssiAt1m: -59, absorption: 2), 10))
        // 6 dB stronger than at 1 m: 10^(−6/30) = 10^−0.2 = 0.630957 m.
        #expect(near(PathLoss.distance(rssi: -53, rssiAt1m: -59, absorption: 3), 0.63095734))
    }

    @Test("RSSI at 1 m: the identity's, else the advertised power, else the default")
    func referencePower() {
        #expect(PathLoss.rssiAt1m(identity: -62, advertised: .atOneMetre(-65), fallback: -59) == -62)
        // An iBeacon's measured power is the RSSI at 1 m.
        #expect(PathLoss.rssiAt1m(identity: nil, advertised: .atOneMetre(-65), fallback: -59) == -65)
        // 0 dBm measured power is an uncalibrated beacon: the default.
        #expect(PathLoss.rssiAt1m(identity: nil, advertised: .atOneMetre(0), fallback: -59) == -59)
        // A power at 0 m (Eddystone, TX Power Level) loses 41 dB in the first metre: −20 → −61.
        #expect(PathLoss.rssiAt1m(identity: nil, advertised: .atSource(-20), fallback: -59) == -61)
        #expect(PathLoss.rssiAt1m(identity: nil, advertised: nil, fallback: -59) == -59)
        // An Eddystone tag at −20 dBm heard at −91 dBm, absorption 3: 10^((−61 + 91)/30) = 10 m.
        let rssiAt1m = PathLoss.rssiAt1m(identity: nil, advertised: .atSource(-20), fallback: -59)
        #expect(abs(PathLoss.distance(rssi: -91, rssiAt1m: rssiAt1m, absorption: 3) - 10) < 1e-9)
    }

    @Test("smoothing: the first report as it is, then 1 − e^(−Δt/4 s) of each step")
    func smoothing() {
        var smoother = RSSISmoother()
        #expect(smoother.value == nil)
        #expect(smoother.add(-60, now: 0) == -60)
        // Δt = 4 s = τ: weight 1 − e^−1 = 0.6321206; −60 + 0.6321206 × (−20) = −72.642411.
        #expect(abs(smoother.add(-80, now: 4) - -72.642411) < 1e-6)
        // Δt = 0 (two reports in one instant): weight 0, nothing moves.
        #expect(abs(smoother.add(-100, now: 4) - -72.642411) < 1e-6)
        // A clock that went back counts as Δt = 0 too.
        #expect(abs(smoother.add(-100, now: 3) - -72.642411) < 1e-6)
        // Δt = 40 s (10τ): weight 1 − e^−10 = 0.9999546; lands within 0.002 dB of −50.
        #expect(abs(smoother.add(-50, now: 44) - -50) < 0.002)
    }
}

@Suite("Presence: config.json presence")
struct PresenceConfigTests {
    /// The same reading of config text as the web section's tests.
    static func parse(_ json: String) throws -> GatewayConfig { try WebConfigTests.parse(json) }
    static func problems(_ json: String) -> [String] { WebConfigTests.problems(json) }

    static let good = """
        {"bluetooth": {"adapters": ["hci0", "hci1"]},
         "presence": {"identities": [
            {"name": "phone_anna", "irk": "\(SpecSample.irkText)", "rssi_at_1m": -62},
            {"name": "keys", "address": "C4:7C:8D:6A:3E:21"},
            {"name": "tag", "ibeacon": "FDA50693-A4E2-4FB1-AFCF-C6EB07647825:100:7"},
            {"name": "eddy", "eddystone_uid": "EDD1EBEAC04E5DEFA017:0BDB87539B67"}],
          "away_after": "5m", "absorption": 2.7, "rssi_at_1m": -61, "room": "kitchen",
          "adapter_rooms": {"hci1": "hall"}}}
        """

    @Test("no section: no presence; an empty one: the defaults")
    func defaults() throws {
        #expect(try Self.parse("{}").presence == nil)
        let presence = try #require(try Self.parse(#"{"presence": {}}"#).presence)
        #expect(presence.identities.isEmpty && presence.awayAfter == 120 && presence.absorption == 3)
        #expect(presence.rssiAt1m == -59 && presence.room == nil && presence.adapterRooms.isEmpty)
    }

    @Test("every kind of identity and every key")
    func good() throws {
        let config = try Self.parse(Self.good)
        let presence = try #require(config.presence)
        #expect(presence.identities.map(\.name) == ["phone_anna", "keys", "tag", "eddy"])
        #expect(presence.identities[0].key == .irk(SpecSample.irk) && presence.identities[0].rssiAt1m == -62)
        #expect(presence.identities[1].key == .address(BluetoothAddress(rawValue: 0xC47C_8D6A_3E21)))
        if case .iBeacon(let uuid, let major, let minor) = presence.identities[2].key {
            #expect(uuid.first == 0xFD && uuid.last == 0x25 && uuid.count == 16 && major == 100 && minor == 7)
        } else {
            Issue.record("tag is not an iBeacon identity")
        }
        #expect(
            presence.identities[3].key
                == .eddystoneUID(
                    namespace: [0xED, 0xD1, 0xEB, 0xEA, 0xC0, 0x4E, 0x5D, 0xEF, 0xA0, 0x17],
                    instance: [0x0B, 0xDB, 0x87, 0x53, 0x9B, 0x67]))
        #expect(presence.awayAfter == 300 && presence.absorption == 2.7 && presence.rssiAt1m == -61)
        #expect(presence.room == "kitchen" && presence.adapterRooms == ["hci1": "hall"])
    }

    @Test("the IRK is a secret: redacted in both cases, and the file holds one")
    func secret() throws {
        let config = try Self.parse(Self.good)
        #expect(config.secrets.contains(SpecSample.irkText))
        #expect(config.secrets.contains(SpecSample.irkText.uppercased()))
        #expect(config.holdsSecrets)
        #expect(
            config.summary
                == "0 device rules, 0 declarative parsers, 0 commands, 4 presence identities, base topic gattway, broker mqtt://127.0.0.1:1883",
            "counted, never shown")
        #expect(
            !(try Self.parse(#"{"presence": {"identities": [{"name": "k", "address": "C4:7C:8D:6A:3E:21"}]}}"#))
                .holdsSecrets)
        let capture = LogCapture()
        capture.logger.redacting(config.secrets)(
            .notice, "irk \(SpecSample.irkText) or \(SpecSample.irkText.uppercased())")
        #expect(capture.all.count == 1 && !capture.all[0].lowercased().contains(SpecSample.irkText))
    }

    @Test("bad identities: each problem with its path, the IRK's text never quoted")
    func badIdentities() {
        let typo = "ec0234a357c8ad05341010a60a397d9"
        let lines = Self.problems(
            """
            {"presence": {"identities": [
              {"irk": "\(SpecSample.irkText)"},
              {"name": "a", "irk": "\(typo)"},
              {"name": "b", "irk": "\(SpecSample.irkText)", "address": "C4:7C:8D:6A:3E:21"},
              {"name": "c"},
              {"name": "d", "ibeacon": "FDA50693-A4E2-4FB1-AFCF-C6EB07647825:100:70000"},
              {"name": "e", "eddystone_uid": "EDD1EBEAC04E5DEFA017"},
              {"name": "f", "address": "C4:7C:8D:6A:3E"},
              {"name": "g/h", "address": "C4:7C:8D:6A:3E:21"},
              {"name": "i", "address": "C4:7C:8D:6A:3E:21", "colour": "red"},
              {"name": "j", "address": "C4:7C:8D:6A:3E:21", "rssi_at_1m": 5},
              "k"]}}
            """)
        #expect(
            lines == [
                "presence.identities[0].name: is required (a name such as \"phone_anna\")",
                "presence.identities[1].irk: expected 32 hex digits (the 16-byte IRK, most significant byte first)",
                "presence.identities[2]: has irk and address; give exactly one of irk, address, ibeacon, eddystone_uid",
                "presence.identities[3]: needs one of irk, address, ibeacon, eddystone_uid (what identifies the device)",
                "presence.identities[4].ibeacon: \"FDA50693-A4E2-4FB1-AFCF-C6EB07647825:100:70000\" is not UUID:major:minor (e.g. \"FDA50693-A4E2-4FB1-AFCF-C6EB07647825:100:7\", major and minor 0 to 65535)",
                "presence.identities[5].eddystone_uid: \"EDD1EBEAC04E5DEFA017\" is not namespace:instance (20 and 12 hex digits, e.g. \"EDD1EBEAC04E5DEFA017:0BDB87539B67\")",
                "presence.identities[6].address: \"C4:7C:8D:6A:3E\" is not a device address (expected e.g. \"C4:7C:8D:6A:3E:21\")",
                "presence.identities[7].name: expected up to 64 printable characters without '/', '+', '#' or spaces",
                "presence.identities[8].colour: is not a known key (expected one of name, irk, address, ibeacon, eddystone_uid, rssi_at_1m)",
                "presence.identities[9].rssi_at_1m: expected dBm from -127 to 0, e.g. -59",
                "presence.identities[10]: expected an object, got \"k\"",
            ])
        #expect(!lines.joined().contains(typo) && !lines.joined().contains(SpecSample.irkText))
    }

    @Test("the same name or the same device twice, and bad settings")
    func badSettings() {
        let lines = Self.problems(
            """
            {"presence": {"identities": [
              {"name": "a", "irk": "\(SpecSample.irkText)"},
              {"name": "a", "address": "C4:7C:8D:6A:3E:21"},
              {"name": "b", "irk": "EC02 34A3 57C8 AD05 3410 10A6 0A39 7D9B"}],
              "away_after": "0s", "absorption": 0.5, "room": "", "adapter_rooms": {"hci1": "hall", "usb0": "x"},
              "rooms": {}}}
            """)
        #expect(
            lines == [
                "presence.identities[1]: \"a\" is already the name of an identity",
                "presence.identities[2]: identifies the same device as \"a\"",
                "presence.away_after: expected a duration of at least 1s, e.g. \"2m\"",
                "presence.absorption: expected a path-loss exponent from 1 to 10 (2 in free space, about 3 indoors)",
                "presence.room: expected a non-empty string",
                "presence.adapter_rooms.usb0: \"usb0\" is not an adapter name (expected hci0, hci1, …)",
                "presence.rooms: is not a known key (expected one of identities, away_after, absorption, rssi_at_1m, room, adapter_rooms, espresense)",
                "presence.adapter_rooms.hci1: is not one of bluetooth.adapters (hci0)",
            ])
    }
}

@Suite("Presence: bridge/request/presence/identity")
struct PresenceRequestTests {
    static let request = "gattway/bridge/request/presence/identity"
    static let response = "gattway/bridge/response/presence/identity"
    static let config = #"{"presence": {"identities": [{"name": "keys", "address": "C4:7C:8D:6A:3E:21"}]}}"#

    func reply(_ harness: Harness, _ payload: String) async -> JSONValue? {
        let before = harness.mqtt.messages(on: Self.response).count
        let responses = await harness.command(Self.request, payload, responseTopic: Self.response)
        #expect(responses.count == before + 1, "exactly one response to \(payload)")
        #expect(!(responses.last?.payloadText.lowercased().contains(SpecSample.irkText) ?? false), "the IRK echoed")
        return responses.last.flatMap { json($0.payloadText) }
    }

    static let phoneReport = BLEDiscovery(
        address: SpecSample.rpa, advertisement: AdvertisementData(rssi: -60), addressType: .random)

    @Test("an identity set at run time resolves the phone's RPA; replaced, then removed; logged without the key")
    func setAndRemove() async throws {
        let capture = LogCapture()
        let harness = try Harness(Self.config, logger: capture.logger)
        try await harness.start()
        #expect(await harness.gateway.presenceIdentity(of: Self.phoneReport) == nil)
        let commands = await harness.gateway.counters.commands

        let set = await reply(
            harness, #"{"name": "phone", "irk": "\#(SpecSample.irkText)", "transaction": "t1"}"#)
        #expect(set?["status"] == .string("ok") && set?["transaction"] == .string("t1"))
        #expect(set?["data"]?["name"] == .string("phone") && set?["data"]?["identity"] == .string("added"))
        #expect(set?["data"]?["identities"] == .number(2) && set?["data"]?["persisted"] == .bool(false))
        #expect(await harness.gateway.presenceIdentityNames == ["keys", "phone"])
        #expect(await harness.gateway.presenceIdentity(of: Self.phoneReport) == "phone")
        var publicReport = Self.phoneReport
        publicReport.addressType = .public
        #expect(await harness.gateway.presenceIdentity(of: publicReport) == nil, "a public address is not resolved")
        #expect(await harness.gateway.counters.commands == commands + 1, "counted as a command")

        let replaced = await reply(harness, #"{"name": "phone", "irk": "\#(SpecSample.irkText)", "rssi_at_1m": -64}"#)
        #expect(replaced?["data"]?["identity"] == .string("replaced"))
        let removed = await reply(harness, #"{"name": "phone", "remove": true}"#)
        #expect(removed?["data"]?["identity"] == .string("removed") && removed?["data"]?["identities"] == .number(1))
        #expect(await harness.gateway.presenceIdentity(of: Self.phoneReport) == nil)
        #expect(capture.all.contains { $0.contains("presence identity phone added on request") })
        #expect(!capture.all.joined().lowercased().contains(SpecSample.irkText))
    }

    @Test("refused: a config.json name, the same device twice, a bad IRK, an unknown removal, no presence section")
    func refused() async throws {
        let harness = try Harness(Self.config)
        try await harness.start()
        func error(_ payload: String) async -> String? {
            let answer = await reply(harness, payload)
            #expect(answer?["status"] == .string("error"))
            if case .string(let text)? = answer?["error"] { return text }
            return nil
        }
        #expect(
            await error(#"{"name": "keys", "irk": "\#(SpecSample.irkText)"}"#)
                == "\"keys\" is an identity of config.json (presence.identities); change it there")
        #expect(
            await error(#"{"name": "keys2", "address": "c4:7c:8d:6a:3e:21"}"#)
                == "keys2 identifies the same device as \"keys\"")
        #expect(
            await error(#"{"name": "phone", "irk": "ec0234"}"#)
                == "irk: expected 32 hex digits (the 16-byte IRK, most significant byte first)")
        #expect(
            await error(#"{"name": "phone", "irk": "\#(SpecSample.irkText)", "room": "x"}"#)
                == "room: is not a known key (expected one of name, irk, address, ibeacon, eddystone_uid, rssi_at_1m)")
        #expect(await error(#"{"name": "phone", "remove": true}"#) == "name: no run-time identity is named \"phone\"")
        #expect(
            await error(#"{"name": "keys", "remove": true}"#)
                == "\"keys\" is an identity of config.json (presence.identities); remove it there")
        #expect(await error("[1]") != nil)
        #expect(await harness.gateway.presenceIdentityNames == ["keys"])

        let without = try Harness("{}")
        try await without.start()
        let responses = await without.command(
            Self.request, #"{"name": "phone", "irk": "\#(SpecSample.irkText)"}"#, responseTopic: Self.response)
        #expect(
            responses.last.flatMap { json($0.payloadText) }?["error"]
                == .string("presence is not configured (config.json has no presence section)"))
    }
}
