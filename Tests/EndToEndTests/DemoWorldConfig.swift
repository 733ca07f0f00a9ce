/// The config.json the end-to-end tests give `gattway run` for the demo scenario's devices:
/// the battery and environmental sensors (notifications), the lamp (state from `ff02`,
/// commands writing `ff01`), and the BTHome and Ruuvi advertisers (decoded advertisements),
/// each under a friendly name. No scan filter, so the heart-rate strap is seen but no rule
/// matches it. `$SERVER` is the broker URL.
enum DemoWorldConfig {
    static let text = """
        {
          "mqtt": {"server": "$SERVER", "base_topic": "gattway", "client_id": "gattway-e2e", "retain": true},
          "bluetooth": {"adapter": "hci0", "connect_timeout": "5s", "gatt_timeout": "3s"},
          "commands": {"max_payload_bytes": 256},
          "parsers": {
            "lamp_state": {"characteristic": "ff02", "fields": [{"name": "light", "offset": 0, "type": "u8"}]}
          },
          "devices": [
            {"match": {"address": "A4:C1:38:00:00:01"}, "name": "battery_sensor", "connect": true,
             "subscribe": [{"service": "180F", "characteristic": "2A19", "parser": "battery_level"}]},
            {"match": {"address": "A4:C1:38:00:00:02"}, "name": "env_sensor", "connect": true,
             "subscribe": [{"characteristic": "2A6E"}, {"characteristic": "2A6F"}]},
            {"match": {"address": "A4:C1:38:00:00:03"}, "name": "lamp", "connect": true,
             "subscribe": [{"service": "ff00", "characteristic": "ff02", "parser": "lamp_state"}],
             "commands": {
               "light": {"service": "ff00", "characteristic": "ff01", "encoding": "bool"},
               "brightness": {"service": "ff00", "characteristic": "ff01", "encoding": "u8", "maximum": 100}
             }},
            {"match": {"address": "A4:C1:38:00:00:04"}, "name": "bthome_th"},
            {"match": {"address": "C4:D3:8C:12:4A:5F"}, "name": "ruuvi"}
          ]
        }
        """
}
