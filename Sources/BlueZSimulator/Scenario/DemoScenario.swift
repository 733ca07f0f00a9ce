/// The built-in demo world (`gattway simulate --scenario demo`, `make demo`): a 180F battery
/// sensor, an environmental sensor (181A with 2A6E/2A6F notifying), a lamp whose writes show in a
/// readable state, a BTHome v2 advertiser, a Ruuvi advertiser, a second BTHome advertiser no rule
/// of the demo's config matches and a tag advertising manufacturer data no parser knows (what the
/// web page's radio view explains), and a heart-rate-only device that a 180F-filtered scan must
/// not report.
public enum DemoScenario {
    /// The scenario as JSON, also printed by `gattway simulate --print-demo`.
    public static let json = #"""
        {
          "seed": 1,
          "adapters": [
            { "name": "hci0", "address": "00:AA:01:00:00:00", "alias": "gattway-demo" }
          ],
          "devices": [
            {
              "address": "A4:C1:38:00:00:01",
              "name": "Battery Sensor",
              "rssi": -58, "rssi_jitter": 3, "interval": "1s",
              "service_uuids": ["180F"],
              "gatt": [
                { "uuid": "180F", "characteristics": [
                  { "uuid": "2A19", "flags": ["read", "notify"],
                    "value": { "number": 100, "format": "u8" },
                    "notify": { "every": "2s",
                                "value": { "number": { "counter": { "start": 99, "step": -1, "min": 5, "max": 100 } }, "format": "u8" } } }
                ] }
              ]
            },
            {
              "address": "A4:C1:38:00:00:02",
              "name": "Env Sensor",
              "rssi": -64, "rssi_jitter": 4, "interval": "1s",
              "service_uuids": ["181A", "180F"],
              "gatt": [
                { "uuid": "181A", "characteristics": [
                  { "uuid": "2A6E", "flags": ["read", "notify"],
                    "value": { "number": 21.5, "format": "s16le", "scale": 0.01 },
                    "notify": { "every": "2s",
                                "value": { "number": { "random": { "min": 20.5, "max": 23.5, "resolution": 0.01 } }, "format": "s16le", "scale": 0.01 } } },
                  { "uuid": "2A6F", "flags": ["read", "notify"],
                    "value": { "number": 45.2, "format": "u16le", "scale": 0.01 },
                    "notify": { "every": "2s",
                                "value": { "number": { "random": { "min": 40, "max": 55, "resolution": 0.01 } }, "format": "u16le", "scale": 0.01 } } }
                ] },
                { "uuid": "180F", "characteristics": [
                  { "uuid": "2A19", "flags": ["read"], "value": { "number": 87, "format": "u8" } }
                ] }
              ]
            },
            {
              "address": "A4:C1:38:00:00:03",
              "name": "Desk Lamp",
              "rssi": -70, "interval": "1s",
              "service_uuids": ["180F", "ff00"],
              "gatt": [
                { "uuid": "ff00", "characteristics": [
                  { "uuid": "ff01", "flags": ["write", "write-without-response"], "reflect_writes_to": "ff02" },
                  { "uuid": "ff02", "flags": ["read", "notify"], "value": { "hex": "00" } }
                ] },
                { "uuid": "180F", "characteristics": [
                  { "uuid": "2A19", "flags": ["read"], "value": { "number": 100, "format": "u8" } }
                ] }
              ]
            },
            {
              "address": "A4:C1:38:00:00:04",
              "name": "BTHome TH",
              "rssi": -66, "rssi_jitter": 3, "interval": "1s", "connectable": false,
              "service_data": {
                "FCD2": { "template": "bthome_v2", "fields": {
                  "packet_id": { "counter": { "start": 0, "step": 1, "min": 0, "max": 255 } },
                  "temperature": { "random": { "min": 19, "max": 22, "resolution": 0.01 } },
                  "humidity": { "random": { "min": 40, "max": 60, "resolution": 0.01 } },
                  "battery": 93 } }
              }
            },
            {
              "address": "C4:D3:8C:12:4A:5F",
              "address_type": "random",
              "name": "Ruuvi 4A5F",
              "rssi": -72, "rssi_jitter": 4, "interval": "1s", "connectable": false,
              "manufacturer_data": {
                "0x0499": { "template": "ruuvi_rawv2", "fields": {
                  "temperature": { "random": { "min": 4, "max": 6, "resolution": 0.005 } },
                  "humidity": { "random": { "min": 70, "max": 80, "resolution": 0.01 } },
                  "pressure": 1008.5,
                  "sequence": { "counter": { "start": 0, "step": 1, "min": 0, "max": 65534 } } } }
              }
            },
            {
              "address": "A4:C1:38:00:00:08",
              "name": "Garden TH",
              "rssi": -81, "rssi_jitter": 3, "interval": "2s", "connectable": false,
              "service_data": {
                "FCD2": { "template": "bthome_v2", "fields": {
                  "packet_id": { "counter": { "start": 0, "step": 1, "min": 0, "max": 255 } },
                  "temperature": { "random": { "min": 8, "max": 11, "resolution": 0.01 } } } }
              }
            },
            {
              "address": "F0:0D:00:00:00:07",
              "name": "Mystery Tag",
              "rssi": -77, "rssi_jitter": 2, "interval": "1s", "connectable": false,
              "manufacturer_data": { "0x0F0F": { "hex": "0a 0b 0c 0d 0e 0f" } }
            },
            {
              "address": "A4:C1:38:00:00:06",
              "name": "HR Strap",
              "rssi": -61, "interval": "1s",
              "service_uuids": ["180D"],
              "gatt": [
                { "uuid": "180D", "characteristics": [
                  { "uuid": "2A37", "flags": ["notify"], "value": { "hex": "0048" },
                    "notify": { "every": "1s" } }
                ] }
              ]
            }
          ]
        }
        """#
}
