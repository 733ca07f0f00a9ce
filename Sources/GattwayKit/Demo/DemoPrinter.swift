import JSON

#if canImport(Glibc)
    import Glibc
#endif

/// Turns what the demo sees on MQTT into readable lines: one line per device state that
/// changed (device, then each attribute with value and unit), units learned from the
/// gateway's Home Assistant discovery configs (`unit_of_measurement`). Attributes without a
/// unit (packet ids, counters) are left out for devices that have measured ones.
struct DemoPrinter {
    let base: String
    /// (state topic, attribute) → unit.
    private var units: [String: String] = [:]
    /// The last printed readings per state topic, so repeats (only rssi/last_seen moved) stay quiet.
    private var printed: [String: String] = [:]
    /// Device names whose availability was printed, with the state.
    private var availability: [String: String] = [:]

    init(base: String) {
        self.base = base
    }

    /// Learns the unit of a sensor from a discovery config (`homeassistant/sensor/…/config`).
    mutating func discovery(_ payload: [UInt8]) {
        guard let config = try? JSONValue.parse(payload),
            case .string(let stateTopic)? = config["state_topic"],
            case .string(let template)? = config["value_template"],
            case .string(let unit)? = config["unit_of_measurement"],
            let attribute = Self.attribute(in: template)
        else { return }
        units[stateTopic + " " + attribute] = unit
    }

    /// The line to print for a message on `<base>/…`, nil when there is nothing new to say.
    mutating func line(topic: String, payload: [UInt8]) -> String? {
        guard topic.hasPrefix(base + "/") else { return nil }
        let levels = topic.dropFirst(base.count + 1).split(separator: "/").map(String.init)
        guard let device = levels.first, device != "bridge" else { return nil }
        if levels.count == 2, levels[1] == "availability" {
            guard case .string(let state)? = (try? JSONValue.parse(payload))?["state"], availability[device] != state
            else { return nil }
            availability[device] = state
            return "\(Self.time())  \(Self.padded(device, 15)) is \(state)"
        }
        guard levels.count == 1, case .object(let members)? = try? JSONValue.parse(payload) else { return nil }
        var readings = members.filter { !["rssi", "linkquality", "last_seen"].contains($0.key) }
        // Housekeeping without a unit (packet ids, counters, the MAC) only when nothing has one.
        let measured = readings.filter { units[topic + " " + $0.key] != nil }
        if !measured.isEmpty { readings = measured }
        guard !readings.isEmpty else { return nil }
        let text = readings.map { member in
            let unit = units[topic + " " + member.key].map { " " + $0 } ?? ""
            return "\(member.key) \(Self.value(member.value))\(unit)"
        }.joined(separator: " · ")
        guard printed[topic] != text else { return nil }
        printed[topic] = text
        var rssi = ""
        if case .number(let value)? = JSONValue.object(members)["rssi"],
            let dBm = Int(exactly: value.rounded(.towardZero))
        {
            rssi = "  (rssi \(dBm) dBm)"
        }
        return "\(Self.time())  \(Self.padded(device, 15)) \(text)\(rssi)"
    }

    /// `{{ value_json.temperature }}` → `temperature`; `{{ value_json['a b'] }}` → `a b`.
    static func attribute(in template: String) -> String? {
        guard let range = template.firstRange(of: "value_json") else { return nil }
        var rest = template[range.upperBound...]
        if rest.hasPrefix(".") {
            rest = rest.dropFirst()
            return String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" })
        }
        if rest.hasPrefix("['"), let end = rest.firstRange(of: "']") {
            return String(rest[rest.index(rest.startIndex, offsetBy: 2)..<end.lowerBound])
        }
        return nil
    }

    static func value(_ value: JSONValue) -> String {
        if case .string(let text) = value { return text }
        return value.serialized
    }

    static func padded(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    /// Local wall-clock time, `HH:MM:SS`.
    static func time() -> String {
        var now = Glibc.time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        return String(twoDigits: parts.tm_hour) + ":" + String(twoDigits: parts.tm_min) + ":"
            + String(twoDigits: parts.tm_sec)
    }
}
