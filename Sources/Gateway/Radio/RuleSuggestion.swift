import Bluetooth
import JSON

/// The device rule that would publish an address the radio hears but the gateway does not
/// publish (``suggest(for:config:)``): for the page to show as JSON to copy into config.json's
/// `devices` — never applied by the gateway.
public struct RuleSuggestion: Sendable, Equatable {
    /// One element of config.json's `devices`.
    public var rule: JSONValue
    /// What else the configuration needs for the rule to take effect (a global filter that
    /// stops the address first, a bind key), in words.
    public var notes: [String]

    /// A rule for `entry`'s address when a parser decodes its advertisement (or would, with a
    /// key) and no rule publishes it, or when a global filter (`scan.services`,
    /// `scan.rssi_threshold`) stops it; nil otherwise (a tracked device, or a payload no parser
    /// knows: a rule would publish nothing).
    public static func suggest(for entry: RadioEntry, config: GatewayConfig) -> RuleSuggestion? {
        let decodable: Bool =
            switch entry.decode {
            case .decoded, .noValues, .keyMissing, .keyWrong, .repeatedFrame: true
            default: false
            }
        switch entry.outcome {
        case .noRule, .registryFull:
            guard decodable else { return nil }
        case .filteredByServices, .belowRSSIThreshold: break
        default: return nil
        }
        var notes: [String] = []
        let rule: JSONValue = .object([
            ("match", .object([("address", .string(entry.address.description))]))
        ])
        switch entry.outcome {
        case .filteredByServices:
            var uuids: [String] = entry.advertisement.serviceUUIDs.map(\.shortDescription)
            let dataUUIDs = entry.advertisement.serviceData.keys.map(\.shortDescription).sorted()
            for uuid in dataUUIDs where !uuids.contains(uuid) { uuids.append(uuid) }
            if uuids.isEmpty {
                notes.append(
                    "it advertises no service UUID: bluetooth.scan.services must be empty ([]) for the gateway to hear it"
                )
            } else {
                notes.append(
                    "add one of its services (\(uuids.prefix(8).joined(separator: ", "))) to bluetooth.scan.services")
            }
        case .belowRSSIThreshold:
            let heard = entry.lastRSSI.map { "\($0) dBm" } ?? "an unknown strength"
            let threshold = config.bluetooth.rssiThreshold.map { "\($0) dBm" } ?? "set"
            notes.append("heard at \(heard), below bluetooth.scan.rssi_threshold (\(threshold)): lower or remove it")
        case .registryFull:
            notes.append("bluetooth.max_devices (\(config.bluetooth.maxDevices)) is reached: raise it")
        default: break
        }
        switch entry.decode {
        case .keyMissing, .keyWrong:
            notes.append(
                "its frames are encrypted: add \"bindkey\" (32 hex digits) to the rule, or set the key with bridge/request/device/bindkey"
            )
        default: break
        }
        let first = config.devices.firstIndex { $0.match.matches(entry.address, entry.advertisement) }
        if let first, entry.outcome != .noRule {
            notes.append("devices[\(first)] matches it already; the rule is needed only if that one goes")
        } else if !config.devices.isEmpty {
            notes.append("put it before any rule that matches more broadly: the first rule that matches decides")
        }
        return RuleSuggestion(rule: rule, notes: notes)
    }
}
