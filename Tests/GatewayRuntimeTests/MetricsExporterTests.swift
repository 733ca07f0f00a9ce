import Gateway
import JSON
import Testing

@testable import GatewayRuntime

@Suite("/metrics from bridge/health and the registry")
struct MetricsExporterTests {
    @Test(
        "named members, drops by reason, devices with hostile names escaped, and sections nobody named still exported")
    func render() throws {
        let health = try JSONValue.parse(
            Array(
                #"""
                {"uptime_s": 12, "process": {"rss_bytes": 1000, "cpu_seconds": 0.5, "cpu_percent": null},
                 "advertisements": 7, "ble_latency_ms": 2.5, "dropped": {"filtered": 3, "key_wrong": 1},
                 "radio": {"path": "mgmt", "reports": 9, "adapters": [{"name": "hci0", "state": "powered_on", "reports": 9}]},
                 "fleet": {"gateway_id": "a", "peers": 2, "owned": 5},
                 "web": {"listening": true},
                 "new-section": {"flag": true, "count": 4, "text": "x"}}
                """#.utf8))
        let device = DeviceSnapshot(
            name: "A4C138000006", address: "A4:C1:38:00:00:06", localName: "evil\"}\n\\", rssi: -61,
            lastSeenMilliseconds: 1_700_000_000_500, connected: false, format: nil, stateTopic: "gattway/A4C138000006")
        var figures = WebCounters.Figures()
        figures.requests = 5
        figures.refused[.unauthorized] = 2
        let text = String(
            decoding: MetricsExporter.render(
                MetricsExporter.Inputs(
                    health: health, devices: [device], mqttBacklog: 3, mqttBacklogLimit: 10_000, freeSlots: 2,
                    maxConnections: 3, web: figures)), as: UTF8.self)
        for line in [
            "gattway_uptime_seconds 12", "gattway_process_resident_memory_bytes 1000",
            "gattway_process_cpu_seconds_total 0.5", "gattway_advertisements_total 7",
            "gattway_ble_latency_seconds 0.0025",
            #"gattway_dropped_total{reason="filtered"} 3"#, #"gattway_dropped_total{reason="key_wrong"} 1"#,
            "gattway_radio_reports_total 9", #"gattway_adapter_reports_total{adapter="hci0"} 9"#,
            #"gattway_adapter_state{adapter="hci0",state="powered_on"} 1"#,
            #"gattway_device_rssi_dbm{name="A4C138000006",address="A4:C1:38:00:00:06"} -61"#,
            #"gattway_device_last_seen_timestamp_seconds{name="A4C138000006",address="A4:C1:38:00:00:06"} 1700000000.5"#,
            #"gattway_device_info{name="A4C138000006",address="A4:C1:38:00:00:06",local_name="evil\"}\n\\"} 1"#,
            "gattway_mqtt_backlog_messages 3", "gattway_mqtt_backlog_limit_messages 10000",
            "gattway_connection_slots 3", "gattway_connection_slots_free 2",
            "gattway_web_requests_total 5", #"gattway_web_refused_total{reason="unauthorized"} 2"#,
            #"gattway_web_refused_total{reason="csrf"} 0"#,
            "gattway_fleet_peers 2", "gattway_fleet_owned 5", "gattway_new_section_flag 1",
            "gattway_new_section_count 4",
        ] {
            #expect(text.contains(line + "\n"), "\(line) in\n\(text)")
        }
        // Each family once; nothing from the web section of bridge/health twice.
        let types = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }
        #expect(Set(types).count == types.count)
        #expect(!text.contains("gattway_web_listening"))
        #expect(!text.contains("cpu_percent"))
    }
}
