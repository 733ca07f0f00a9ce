import Bluetooth
import JSON

/// ESPresense's device topics (`presence.espresense`; docs/config.md, "ESPresense"): the id an
/// ESPresense node gives each kind of identity, its topic, and its payload. Formats taken from
/// ESPresense's firmware and documentation; nothing of ESPresense's code.
package enum ESPresense {
    /// ESPresense's fixed first topic level.
    package static let channel = "espresense"

    /// The id an ESPresense node reports the device of `key` under:
    /// - an IRK: `irk:` and the key as 32 lowercase hex digits, most significant byte first (the
    ///   order ESPresense's `known_irks` and its IRK decoder use, the same as `irk` in config.json);
    /// - a fixed address: `known:` and the address as 12 lowercase hex digits without colons
    ///   (ESPresense's id for an address in its `known_macs`);
    /// - an iBeacon: `iBeacon:` and the proximity UUID (lowercase, 8-4-4-4-12), major and minor in
    ///   decimal, joined by `-`;
    /// - an Eddystone UID: `eddy:`, the namespace, `-`, the instance, in lowercase hex — with the
    ///   namespace's fifth byte written twice (22 digits), as ESPresense's firmware writes it, so a
    ///   beacon heard by a gateway and by ESPresense nodes is one device to their consumers.
    package static func id(_ key: PresenceIdentity.Key) -> String {
        switch key {
        case .irk(let irk):
            return "irk:" + Hex.encode(irk)
        case .address(let address):
            return "known:" + Hex.encode(address.rawValue, digits: 12)
        case .iBeacon(let uuid, let major, let minor):
            return "iBeacon:" + uuidText(uuid) + "-\(major)-\(minor)"
        case .eddystoneUID(let namespace, let instance):
            var written = Array(namespace.prefix(5))
            written += namespace.dropFirst(4)
            return "eddy:" + Hex.encode(written) + "-" + Hex.encode(instance)
        }
    }

    /// `espresense/devices/<id>/<room>`.
    package static func topic(id: String, room: String) -> String {
        channel + "/devices/" + id + "/" + room
    }

    /// 16 bytes as a lowercase UUID, 8-4-4-4-12.
    static func uuidText(_ bytes: [UInt8]) -> String {
        let hex = Hex.encode(bytes)
        guard hex.utf8.count == 32 else { return hex }
        var text = ""
        for (offset, character) in hex.enumerated() {
            if offset == 8 || offset == 12 || offset == 16 || offset == 20 { text.append("-") }
            text.append(character)
        }
        return text
    }
}

extension Presence {
    /// The ESPresense message of the identity named `name` while it is home (nil otherwise): its
    /// topic and payload. The payload has ESPresense's field names: `id`, `name` (the identity's
    /// name), `mac` (the address of the last report, 12 lowercase hex digits), `rssi@1m` (the
    /// reference the distance used), `rssi` (smoothed, dBm) and `distance` (metres), both with
    /// two decimals. `room` is the room of `<base>/presence/<name>` unless
    /// `presence.espresense.room` names one.
    func espresenseMessage(_ name: String, room: String) -> (topic: String, payload: JSONValue)? {
        guard let espresense = settings.espresense, let track = tracks[name], track.home,
            let identity = identities.first(where: { $0.name == name })
        else { return nil }
        let id = ESPresense.id(identity.key)
        func hundredths(_ value: Double) -> JSONValue { .number((value * 100).rounded() / 100) }
        var members: [(key: String, value: JSONValue)] = [("id", .string(id)), ("name", .string(name))]
        if let address = track.address { members.append(("mac", .string(Hex.encode(address.rawValue, digits: 12)))) }
        if let reference = track.rssiAt1m { members.append(("rssi@1m", hundredths(reference))) }
        if let rssi = track.rssi { members.append(("rssi", hundredths(rssi))) }
        if let distance = track.distance { members.append(("distance", hundredths(distance))) }
        return (ESPresense.topic(id: id, room: espresense.room ?? room), .object(members))
    }
}
