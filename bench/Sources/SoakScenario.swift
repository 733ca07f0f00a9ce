import BlueZSimulator
import Foundation

/// The world of `make soak` (RELIABILITY.md): the demo scenario's devices, connected as in
/// `make demo`, with the battery sensor's level and the environmental sensor's temperature
/// notified by the soak itself (``CounterSensor``: a counter, so every reading can be accounted
/// for), plus ``advertisers`` ATC1441 thermometers whose addresses rotate (``AdvertiserRotation``).
enum SoakScenario {
    static let battery = "A4:C1:38:00:00:01"
    static let environment = "A4:C1:38:00:00:02"
    static let lamp = "A4:C1:38:00:00:03"
    /// The devices gattway connects to.
    static let connected = [battery, environment, lamp]
    static let adapter = "hci0"

    /// ATC1441 advertisers live at a time, and their interval: 200 / 0.4 s = 500 adv/s.
    static let advertisers = 200
    static let advertisingInterval = 0.4
    /// Their addresses share this prefix (the gateway's rule for them) and a 16-bit serial.
    static let advertiserPrefix = "A4:C1:38:A0"

    /// The demo scenario (BlueZ's own timing) without the timers of the characteristics the soak
    /// notifies itself: battery 2A19 and the environmental sensor's 2A6E and 2A6F (humidity is
    /// not notified, so each of its state messages is one temperature reading).
    static func scenario() throws -> Scenario {
        var scenario = try Scenario.parse(Data(DemoScenario.json.utf8))
        for device in scenario.devices.indices
        where [battery, environment].contains(scenario.devices[device].address.description) {
            for service in scenario.devices[device].services.indices {
                for characteristic in scenario.devices[device].services[service].characteristics.indices {
                    scenario.devices[device].services[service].characteristics[characteristic].notifyInterval = nil
                }
            }
        }
        return scenario
    }

    /// gattway's config: the demo's device rules (HA discovery on, QoS 1 for everything, not
    /// retained), the ATC1441 advertisers by address prefix, health every 10 s.
    static func gatewayConfig(port: UInt16) -> String {
        """
        {
          "mqtt": {"server": "mqtt://127.0.0.1:\(port)", "base_topic": "gattway", "client_id": "gattway-soak", "qos": 1},
          "bluetooth": {"adapter": "\(adapter)"},
          "health": {"interval": "10s"},
          "parsers": {
            "lamp_state": {"characteristic": "ff02", "fields": [{"name": "light", "offset": 0, "type": "u8"}]}
          },
          "devices": [
            {"match": {"address": "\(battery)"}, "name": "battery_sensor", "connect": true,
             "subscribe": [{"service": "180F", "characteristic": "2A19"}]},
            {"match": {"address": "\(environment)"}, "name": "env_sensor", "connect": true,
             "subscribe": [{"characteristic": "2A6E"}, {"characteristic": "2A19"}]},
            {"match": {"address": "\(lamp)"}, "name": "desk_lamp", "connect": true,
             "subscribe": [{"service": "ff00", "characteristic": "ff02", "parser": "lamp_state"}],
             "commands": {"light": {"service": "ff00", "characteristic": "ff01", "encoding": "bool"}}},
            {"match": {"address": "A4:C1:38:00:00:04"}, "name": "bthome_th"},
            {"match": {"address": "C4:D3:8C:12:4A:5F"}, "name": "ruuvi"},
            {"match": {"address_prefix": "\(advertiserPrefix)"}}
          ]
        }
        """
    }

    /// The address of advertiser number `serial` (wraps after 65,536).
    static func advertiserAddress(_ serial: Int) -> String {
        String(format: "\(advertiserPrefix):%02X:%02X", (serial >> 8) & 0xFF, serial & 0xFF)
    }

    /// One ATC1441 thermometer: non-connectable, a frame counter that changes every report (so
    /// each report is a reading) and a random temperature.
    static func advertiserJSON(_ serial: Int) -> String {
        """
        {"address": "\(advertiserAddress(serial))", "interval": \(advertisingInterval), "connectable": false,
         "service_data": {"181A": {"template": "atc1441", "fields": {
           "counter": {"counter": {"start": 0, "step": 1, "min": 0, "max": 255}},
           "temperature": {"random": {"min": 18, "max": 26, "resolution": 0.1}}}}}}
        """
    }
}
