import Bluetooth
import JSON

/// `presence` in config.json: who is home and in which room, from the people's phones and watches
/// (resolvable private addresses, by Identity Resolving Key) and from trackers that do not rotate
/// (docs/config.md, "presence"). Absent: nothing of presence is built and nothing costs.
public struct PresenceSettings: Sendable, Equatable {
    /// `identities`, in file order.
    public var identities: [PresenceIdentity] = []
    /// `away_after`: how long an identity goes unheard before it is `not_home` (seconds).
    public var awayAfter = 120.0
    /// `absorption`: the path-loss exponent of the distance estimate (docs/config.md).
    public var absorption = PathLoss.defaultAbsorption
    /// `rssi_at_1m`: the RSSI at 1 m of an identity that neither advertises its power nor has its
    /// own `rssi_at_1m` (dBm).
    public var rssiAt1m = PathLoss.defaultRSSIAt1m
    /// `room`: this gateway's room; nil: the gateway's name (`fleet.gateway_id` or `mqtt.client_id`).
    public var room: String?
    /// `adapter_rooms`: the room of an adapter that is not in ``room`` (several adapters).
    public var adapterRooms: [String: String] = [:]
    /// `espresense`: ESPresense's own topics as well (docs/config.md, "ESPresense"); nil: off.
    public var espresense: ESPresenseSettings?

    /// Most identities (in config.json and set at run time together): resolving an unknown address
    /// costs one AES block per identity.
    public static let maxIdentities = 1000

    public init() {}

    init(_ object: inout ConfigObject) {
        let problems = object.problems
        if let value = object.value("identities"), let items = problems.attempt({ try value.array() }) {
            if items.count > Self.maxIdentities {
                problems.add(value.path, "has \(items.count) identities (at most \(Self.maxIdentities))")
            }
            for item in items.prefix(Self.maxIdentities) {
                guard var entry = ConfigObject(item, problems), let identity = PresenceIdentity(&entry) else {
                    continue
                }
                if let clash = Self.clash(identity, with: identities) {
                    problems.add(item.path, clash)
                } else {
                    identities.append(identity)
                }
            }
        }
        awayAfter = object.read("away_after", default: awayAfter) { reader in
            let seconds = try reader.duration()
            guard seconds >= 1 else { throw reader.fail("expected a duration of at least 1s, e.g. \"2m\"") }
            return seconds
        }
        absorption = object.read("absorption", default: absorption) { try PathLoss.absorption($0) }
        rssiAt1m = object.read("rssi_at_1m", default: rssiAt1m) { try PathLoss.rssiAt1m($0) }
        room = object.optional("room") { try $0.room() }
        if let value = object.value("adapter_rooms"), let rooms = problems.attempt({ try value.object() }) {
            for (adapter, reader) in rooms.entries() {
                guard let room = problems.attempt({ try reader.room() }) else { continue }
                guard adapter.hasPrefix("hci"), let number = Int(adapter.dropFirst(3)), number >= 0 else {
                    problems.add(reader.path, "\"\(adapter)\" is not an adapter name (expected hci0, hci1, …)")
                    continue
                }
                adapterRooms[adapter] = room
            }
        }
        if let value = object.value("espresense"), var section = ConfigObject(value, problems) {
            let settings = ESPresenseSettings(&section)
            espresense = settings.enabled ? settings : nil
        }
        object.finish()
    }

    /// Why `identity` cannot join `identities` (a name or a key already there); nil when it can.
    static func clash(_ identity: PresenceIdentity, with identities: [PresenceIdentity]) -> String? {
        if let other = identities.first(where: { $0.name == identity.name }) {
            return "\"\(other.name)\" is already the name of an identity"
        }
        if let other = identities.first(where: { $0.key == identity.key }) {
            return "identifies the same device as \"\(other.name)\""
        }
        return nil
    }

    /// `adapter_rooms` names only adapters of `bluetooth.adapters`.
    func check(adapters: [String], _ problems: ConfigProblems) {
        for adapter in adapterRooms.keys.sorted() where !adapters.contains(adapter) {
            problems.add(
                "presence.adapter_rooms.\(adapter)",
                "is not one of bluetooth.adapters (\(adapters.joined(separator: ", ")))")
        }
    }
}

/// `presence.espresense`: each identity heard is also published the way an ESPresense node
/// publishes it, `espresense/devices/<id>/<room>`, so ESPresense-companion and Home Assistant's
/// `mqtt_room` take the gateway for one more room.
public struct ESPresenseSettings: Sendable, Equatable {
    /// `enabled`: true when the object is given, unless it says false.
    public var enabled = true
    /// `room`: the room level of the topics; nil: the room of `<base>/presence/<name>` (the
    /// adapter's `adapter_rooms` room, else `presence.room`, else the gateway's name).
    public var room: String?

    public init(enabled: Bool = true, room: String? = nil) {
        self.enabled = enabled
        self.room = room
    }

    init(_ object: inout ConfigObject) {
        enabled = object.read("enabled", default: enabled) { try $0.bool() }
        room = object.optional("room") { try $0.room() }
        object.finish()
    }
}

/// One person's device or one tracker of `presence.identities`: a name and what identifies it.
public struct PresenceIdentity: Sendable, Equatable {
    /// How a report is tied to the identity.
    public enum Key: Sendable, Equatable {
        /// `irk`: the Identity Resolving Key (16 bytes, most significant first): every resolvable
        /// private address the device takes resolves to it (a secret, like a bind key).
        case irk([UInt8])
        /// `address`: a fixed device address (a public or static random address).
        case address(BluetoothAddress)
        /// `ibeacon`: the proximity UUID (16 bytes as written), major and minor.
        case iBeacon(uuid: [UInt8], major: UInt16, minor: UInt16)
        /// `eddystone_uid`: the 10-byte namespace and 6-byte instance.
        case eddystoneUID(namespace: [UInt8], instance: [UInt8])
    }

    /// `name`: a topic level (later `<base>/presence/<name>`), unique among the identities.
    public var name: String
    public var key: Key
    /// `rssi_at_1m`: the RSSI measured at 1 m (dBm); nil: the advertised power, else
    /// `presence.rssi_at_1m`.
    public var rssiAt1m: Double?

    public init(name: String, key: Key, rssiAt1m: Double? = nil) {
        self.name = name
        self.key = key
        self.rssiAt1m = rssiAt1m
    }

    /// The keys that say what identifies it; exactly one of them is given.
    static let keyNames = ["irk", "address", "ibeacon", "eddystone_uid"]

    /// Reads one identity object (of config.json or of the bridge request); nil when a problem was
    /// recorded.
    init?(_ object: inout ConfigObject) {
        let problems = object.problems
        let before = problems.errors.count
        let name = object.required("name", expected: "a name such as \"phone_anna\"") { try $0.room() }
        var keys: [Key] = []
        if let key = object.optional("irk", { try Self.irk($0) }) { keys.append(key) }
        if let key = object.optional("address", { try Self.address($0) }) { keys.append(key) }
        if let key = object.optional("ibeacon", { try Self.iBeacon($0) }) { keys.append(key) }
        if let key = object.optional("eddystone_uid", { try Self.eddystoneUID($0) }) { keys.append(key) }
        let rssiAt1m = object.optional("rssi_at_1m") { try PathLoss.rssiAt1m($0) }
        object.finish()
        let given = Self.keyNames.filter { object.reader.optional($0) != nil }
        if given.count != 1 {
            problems.add(
                object.path,
                given.isEmpty
                    ? "needs one of \(Self.keyNames.joined(separator: ", ")) (what identifies the device)"
                    : "has \(given.joined(separator: " and ")); give exactly one of \(Self.keyNames.joined(separator: ", "))"
            )
        }
        guard problems.errors.count == before, let name, keys.count == 1 else { return nil }
        self.init(name: name, key: keys[0], rssiAt1m: rssiAt1m)
    }

    /// 32 hex digits, most significant byte first (separators ` `, `:`, `-` allowed, as for bind
    /// keys). The message never quotes the text: it may be a key with a typo.
    static func irk(_ reader: JSONReader) throws -> Key {
        guard let bytes = BindKeys.key(try reader.string()) else {
            throw reader.fail("expected 32 hex digits (the 16-byte IRK, most significant byte first)")
        }
        return .irk(bytes)
    }

    static func address(_ reader: JSONReader) throws -> Key {
        let text = try reader.string()
        guard let address = BluetoothAddress(text) else {
            throw reader.fail("\"\(text)\" is not a device address (expected e.g. \"C4:7C:8D:6A:3E:21\")")
        }
        return .address(address)
    }

    /// `UUID:major:minor`: the proximity UUID as 32 hex digits (dashes allowed), major and minor
    /// in decimal, 0 to 65535.
    static func iBeacon(_ reader: JSONReader) throws -> Key {
        let text = try reader.string()
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].utf8.count <= 36, let uuid = Hex.decode(parts[0], separators: "-"),
            uuid.count == 16, let major = UInt16(parts[1]), let minor = UInt16(parts[2])
        else {
            throw reader.fail(
                "\"\(text)\" is not UUID:major:minor (e.g. \"FDA50693-A4E2-4FB1-AFCF-C6EB07647825:100:7\", major and minor 0 to 65535)"
            )
        }
        return .iBeacon(uuid: uuid, major: major, minor: minor)
    }

    /// `namespace:instance`: 20 and 12 hex digits.
    static func eddystoneUID(_ reader: JSONReader) throws -> Key {
        let text = try reader.string()
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].utf8.count == 20, parts[1].utf8.count == 12,
            let namespace = Hex.decode(parts[0], separators: ""), let instance = Hex.decode(parts[1], separators: "")
        else {
            throw reader.fail(
                "\"\(text)\" is not namespace:instance (20 and 12 hex digits, e.g. \"EDD1EBEAC04E5DEFA017:0BDB87539B67\")"
            )
        }
        return .eddystoneUID(namespace: namespace, instance: instance)
    }
}

extension JSONReader {
    /// A name that is one MQTT topic level: 1 to 64 bytes, printable, without spaces, `/`, `+`
    /// or `#` (a room, an identity's name).
    func room() throws -> String {
        let text = try nonEmptyString()
        guard text.utf8.count <= 64,
            text.unicodeScalars.allSatisfy({
                $0.value > 0x20 && $0.value != 0x7F && $0 != "/" && $0 != "+" && $0 != "#"
            })
        else {
            throw fail("expected up to 64 printable characters without '/', '+', '#' or spaces")
        }
        return text
    }
}
