import Bluetooth
import JSON

/// The fleet message on the wire (docs/fleet.md, "Messages"):
///
/// ```
/// {"gateway":"pi-hall","state":"online","devices":[["A4C138000004",-67,1,"00000000000000a7"],…]}
/// ```
///
/// one entry per device: the address (12 hex digits), the smoothed RSSI (an integer, or null),
/// the claim (0 none, 1 owner, 2 claiming), the content key of the last reading published
/// (16 hex digits, or null) and, when there are any, the hashes of the commands for the device
/// run in the last 10 s (an array of 16 hex digits each, at most 16). Presence identities
/// (docs/fleet.md, "Presence") follow in `"identities"`: `["<16 hex digits>", rssi, claim]`, the
/// identity's key (``FleetView/identityKey(_:)``, its top bit set). Anything else is refused with a
/// reason; the message is untrusted (any MQTT client may publish under the fleet topic).
package enum FleetMessageCodec {
    /// At most this many devices in one message (more is refused): a bound on what one message
    /// can make a gateway remember.
    package static let maxDevices = 4096
    /// Messages longer than this are refused before parsing.
    package static let maxBytes = 256 * 1024

    package struct Invalid: Error, Equatable, CustomStringConvertible {
        package let reason: String
        package var description: String { reason }
    }

    package static func encode(_ message: FleetView.Message) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + message.sightings.count * 44)
        out.append(contentsOf: #"{"gateway":"#.utf8)
        JSONValue.string(message.gateway).write(into: &out)
        out.append(
            contentsOf: message.online
                ? #","state":"online","devices":["#.utf8 : #","state":"offline","devices":["#.utf8)
        var index = 0
        for sighting in message.sightings where !FleetView.isIdentity(sighting.address) {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            index += 1
            out.append(contentsOf: "[\"".utf8)
            Hex.append(sighting.address, digits: 12, to: &out)
            out.append(contentsOf: "\",".utf8)
            appendRSSI(sighting.rssi, to: &out)
            out.append(contentsOf: ",\(sighting.claim.rawValue),".utf8)
            if let key = sighting.key {
                out.append(UInt8(ascii: "\""))
                Hex.append(key, digits: 16, to: &out)
                out.append(UInt8(ascii: "\""))
            } else {
                out.append(contentsOf: "null".utf8)
            }
            if !sighting.ran.isEmpty {
                out.append(contentsOf: ",[".utf8)
                for (position, hash) in sighting.ran.enumerated() {
                    out.append(contentsOf: position == 0 ? "\"".utf8 : ",\"".utf8)
                    Hex.append(hash, digits: 16, to: &out)
                    out.append(UInt8(ascii: "\""))
                }
                out.append(UInt8(ascii: "]"))
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "]"))
        var first = true
        for sighting in message.sightings where FleetView.isIdentity(sighting.address) {
            out.append(contentsOf: first ? #","identities":[[""#.utf8 : ",[\"".utf8)
            first = false
            Hex.append(sighting.address, digits: 16, to: &out)
            out.append(contentsOf: "\",".utf8)
            appendRSSI(sighting.rssi, to: &out)
            out.append(contentsOf: ",\(sighting.claim.rawValue)]".utf8)
        }
        if !first { out.append(UInt8(ascii: "]")) }
        out.append(UInt8(ascii: "}"))
        return out
    }

    package static func decode(_ bytes: [UInt8]) throws(Invalid) -> FleetView.Message {
        guard bytes.count <= maxBytes else { throw Invalid(reason: "longer than \(maxBytes) bytes") }
        let value: JSONValue
        do { value = try JSONValue.parse(bytes) } catch { throw Invalid(reason: "not JSON: \(error)") }
        guard case .object(let members) = value else { throw Invalid(reason: "not a JSON object") }
        var gateway: String?
        var online: Bool?
        var sightings: [FleetView.Sighting] = []
        var identities: [FleetView.Sighting] = []
        for (key, member) in members {
            switch key {
            case "gateway":
                guard case .string(let text) = member, !text.isEmpty, text.utf8.count <= 64 else {
                    throw Invalid(reason: "gateway: expected a name of 1 to 64 bytes")
                }
                gateway = text
            case "state":
                guard case .string(let text) = member, text == "online" || text == "offline" else {
                    throw Invalid(reason: "state: expected \"online\" or \"offline\"")
                }
                online = text == "online"
            case "devices":
                guard case .array(let entries) = member else { throw Invalid(reason: "devices: expected an array") }
                guard entries.count <= maxDevices else {
                    throw Invalid(reason: "devices: more than \(maxDevices) entries")
                }
                sightings.reserveCapacity(entries.count)
                guard sightings.count + identities.count + entries.count <= maxDevices else {
                    throw Invalid(reason: "devices and identities: more than \(maxDevices) entries")
                }
                for (index, entry) in entries.enumerated() { sightings.append(try sighting(entry, index)) }
            case "identities":
                guard case .array(let entries) = member else { throw Invalid(reason: "identities: expected an array") }
                guard sightings.count + identities.count + entries.count <= maxDevices else {
                    throw Invalid(reason: "devices and identities: more than \(maxDevices) entries")
                }
                for (index, entry) in entries.enumerated() { identities.append(try identity(entry, index)) }
            default:
                continue  // later versions may add members
            }
        }
        guard let gateway else { throw Invalid(reason: "gateway: missing") }
        guard let online else { throw Invalid(reason: "state: missing") }
        // Devices first, then identities: the order they are encoded in.
        return FleetView.Message(gateway: gateway, online: online, sightings: online ? sightings + identities : [])
    }

    /// One entry of `identities`: `["<16 hex digits, top bit set>", rssi, claim]`.
    private static func identity(_ entry: JSONValue, _ index: Int) throws(Invalid) -> FleetView.Sighting {
        guard case .array(let fields) = entry, fields.count >= 3 else {
            throw Invalid(reason: "identities[\(index)]: expected [key, rssi, claim]")
        }
        guard case .string(let text) = fields[0], text.utf8.count == 16, let key = UInt64(text, radix: 16),
            FleetView.isIdentity(key)
        else {
            throw Invalid(reason: "identities[\(index)][0]: expected 16 hex digits, the first 8 to f")
        }
        let rssi = try rssi(fields[1], "identities[\(index)][1]")
        guard case .number(let number) = fields[2], let raw = Int(exactly: number),
            let claim = FleetView.Claim(rawValue: raw)
        else {
            throw Invalid(reason: "identities[\(index)][2]: expected 0, 1 or 2")
        }
        return FleetView.Sighting(address: key, rssi: rssi, claim: claim, key: nil)
    }

    private static func rssi(_ field: JSONValue, _ path: String) throws(Invalid) -> Double? {
        switch field {
        case .null: return nil
        case .number(let number) where Int(exactly: number).map({ (-127...20).contains($0) }) == true: return number
        default: throw Invalid(reason: "\(path): expected an integer RSSI from -127 to 20 dBm, or null")
        }
    }

    private static func sighting(_ entry: JSONValue, _ index: Int) throws(Invalid) -> FleetView.Sighting {
        guard case .array(let fields) = entry, fields.count >= 4 else {
            throw Invalid(reason: "devices[\(index)]: expected [address, rssi, claim, key]")
        }
        guard case .string(let text) = fields[0], text.utf8.count == 12, let address = UInt64(text, radix: 16) else {
            throw Invalid(reason: "devices[\(index)][0]: expected 12 hex digits")
        }
        var rssi: Double?
        switch fields[1] {
        case .null: rssi = nil
        case .number(let number) where Int(exactly: number).map({ (-127...20).contains($0) }) == true: rssi = number
        default: throw Invalid(reason: "devices[\(index)][1]: expected an integer RSSI from -127 to 20 dBm, or null")
        }
        guard case .number(let number) = fields[2], let raw = Int(exactly: number),
            let claim = FleetView.Claim(rawValue: raw)
        else {
            throw Invalid(reason: "devices[\(index)][2]: expected 0, 1 or 2")
        }
        var key: UInt64?
        switch fields[3] {
        case .null: key = nil
        case .string(let text) where text.utf8.count == 16:
            guard let value = UInt64(text, radix: 16) else {
                throw Invalid(reason: "devices[\(index)][3]: expected 16 hex digits or null")
            }
            key = value
        default: throw Invalid(reason: "devices[\(index)][3]: expected 16 hex digits or null")
        }
        var ran: [UInt64] = []
        if fields.count > 4 {
            guard case .array(let hashes) = fields[4], hashes.count <= FleetView.maxCommands else {
                throw Invalid(reason: "devices[\(index)][4]: expected at most \(FleetView.maxCommands) command hashes")
            }
            for hash in hashes {
                guard case .string(let text) = hash, text.utf8.count == 16, let value = UInt64(text, radix: 16) else {
                    throw Invalid(reason: "devices[\(index)][4]: expected 16 hex digits per command")
                }
                ran.append(value)
            }
        }
        return FleetView.Sighting(address: address, rssi: rssi, claim: claim, key: key, ran: ran)
    }

    /// A sighting's RSSI as the message writes it: whole dBm, or `null` when unknown.
    private static func appendRSSI(_ rssi: Double?, to out: inout [UInt8]) {
        if let rssi, rssi.isFinite {
            out.append(contentsOf: String(Int(saturating: rssi.rounded())).utf8)
        } else {
            out.append(contentsOf: "null".utf8)
        }
    }
}
