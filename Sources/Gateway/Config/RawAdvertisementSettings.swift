import JSON

/// `mqtt.raw_advertisements` in config.json: the raw radio on MQTT — every report the gateway
/// hears (or every changed one) as JSON on `<base>/bridge/radio/<address>`, with its AD bytes,
/// RSSI, adapter and what the parsers made of it (docs/config.md, "The raw radio"). `false` or
/// absent: off; `true`: on with the defaults; an object: on unless `"enabled": false`.
public struct RawAdvertisementSettings: Sendable, Equatable {
    /// Which reports are published.
    public enum Mode: String, Sendable, Equatable {
        /// Every report (still at most one per address per ``interval``).
        case all
        /// A report whose AD bytes, address type or decode outcome differ from the last one
        /// published for its address.
        case changed
    }

    public var enabled = false
    public var mode = Mode.changed
    /// At most one message per address per interval (seconds); the rest are counted as
    /// `dropped.radio_rate_limited`. 0: no limit.
    public var interval: Double = 1
    /// At most this many addresses are remembered (``RadioView``): beyond it the longest silent go.
    public var maxAddresses = 1000
    /// An address not heard for this long leaves the view (seconds).
    public var window: Double = 300

    public init() {}

    init(_ reader: JSONReader, _ problems: ConfigProblems) {
        if case .bool(let on) = reader.value {
            enabled = on
            return
        }
        guard var object = ConfigObject(reader, problems) else { return }
        enabled = object.read("enabled", default: true) { try $0.bool() }
        mode = object.read("mode", default: mode) { reader in
            let text = try reader.string()
            guard let mode = Mode(rawValue: text) else {
                throw reader.fail("\"\(text)\" is not a mode (expected \"all\" or \"changed\")")
            }
            return mode
        }
        interval = object.read("interval", default: interval) { reader in
            let seconds = try reader.duration()
            guard seconds <= 3600 else { throw reader.fail("expected a duration from 0s to 1h, e.g. \"1s\"") }
            return seconds
        }
        maxAddresses = object.read("max_addresses", default: maxAddresses) { try $0.integer(in: 1...100_000) }
        window = object.read("window", default: window) { reader in
            let seconds = try reader.duration()
            guard seconds >= 1, seconds <= 86_400 else {
                throw reader.fail("expected a duration from 1s to 24h, e.g. \"5m\"")
            }
            return seconds
        }
        object.finish()
    }
}
