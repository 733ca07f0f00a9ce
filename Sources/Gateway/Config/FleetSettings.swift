import JSON

/// `fleet` in config.json: several gateways of one base topic share what they hear and elect one
/// owner per device over MQTT (docs/fleet.md).
public struct FleetSettings: Sendable, Equatable {
    public var enabled = false
    /// `gateway_id`: this gateway's name in the fleet; nil: `mqtt.client_id`.
    public var gatewayID: String?
    /// `hysteresis_db`: how much better (smoothed RSSI) another gateway must hear a device to take
    /// it over…
    public var hysteresisDB = 6.0
    /// `handover_after`: …for this long (seconds).
    public var handoverAfter = 30.0
    /// `lease`: how long a gateway's ownership lasts without a fleet message from it (seconds).
    public var lease = 15.0

    public init() {}

    init(_ object: inout ConfigObject) {
        enabled = object.read("enabled", default: enabled) { try $0.bool() }
        gatewayID = object.optional("gateway_id") { reader in
            let text = try reader.nonEmptyString()
            // A topic level: no MQTT wildcards or separators, printable, short.
            guard text.utf8.count <= 64,
                text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0 != "/" && $0 != "+" && $0 != "#" })
            else {
                throw reader.fail("expected up to 64 printable characters without '/', '+', '#' or spaces")
            }
            return text
        }
        hysteresisDB = object.read("hysteresis_db", default: hysteresisDB) { reader in
            let value = try reader.number()
            guard (0...60).contains(value) else { throw reader.fail("expected a number of dB from 0 to 60") }
            return value
        }
        handoverAfter = object.read("handover_after", default: handoverAfter) { try $0.positiveDuration() }
        lease = object.read("lease", default: lease) { try $0.positiveDuration() }
        if lease < 3 {
            object.problems.add(object.childPath("lease"), "must be at least 3 s (fleet messages go out every lease/5)")
        }
        object.finish()
    }
}
