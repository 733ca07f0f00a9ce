/// The config.json `gattway demo` gives the gateway for the demo scenario's devices
/// (docs/simulator.md, "The demo scenario").
enum DemoConfig {
    /// The base topic of the demo.
    static let base = "gattway"
    /// The lamp's friendly name (topic level) and its command.
    static let lamp = "desk_lamp"
    static let lampAddress = "A4:C1:38:00:00:03"

    /// The battery sensor and environmental sensor notify (the env sensor's read-only battery
    /// level is read on connect), BTHome and Ruuvi advertisements are decoded, and the lamp has
    /// a `light` command writing `ff01` whose state (`ff02`, decoded by a declarative parser)
    /// notifies and can be read back with `/get`. The heart-rate strap matches no rule.
    /// The web page listens on `webPort` of 127.0.0.1, behind `webToken` when there is one.
    static func text(brokerURL: String, webPort: UInt16 = 8080, webToken: String? = nil) -> String {
        let auth = webToken.map { #", "auth": {"token": "\#($0)"}"# } ?? ""
        return """
            {
              "mqtt": {"server": "\(brokerURL)", "base_topic": "\(base)", "client_id": "gattway-demo", "retain": true},
              "web": {"listen": "127.0.0.1:\(webPort)"\(auth)},
              "bluetooth": {"adapter": "hci0"},
              "homeassistant": {"state_delay": "200ms"},
              "parsers": {
                "lamp_state": {"characteristic": "ff02", "fields": [{"name": "light", "offset": 0, "type": "u8"}]}
              },
              "devices": [
                {"match": {"address": "A4:C1:38:00:00:01"}, "name": "battery_sensor", "connect": true,
                 "subscribe": [{"service": "180F", "characteristic": "2A19"}]},
                {"match": {"address": "A4:C1:38:00:00:02"}, "name": "env_sensor", "connect": true,
                 "subscribe": [{"characteristic": "2A6E"}, {"characteristic": "2A6F"}, {"characteristic": "2A19"}]},
                {"match": {"address": "\(lampAddress)"}, "name": "\(lamp)", "connect": true,
                 "subscribe": [{"service": "ff00", "characteristic": "ff02", "parser": "lamp_state"}],
                 "commands": {"light": {"service": "ff00", "characteristic": "ff01", "encoding": "bool"}}},
                {"match": {"address": "A4:C1:38:00:00:04"}, "name": "bthome_th"},
                {"match": {"address": "C4:D3:8C:12:4A:5F"}, "name": "ruuvi"}
              ]
            }
            """
    }
}
