import JSON

extension HomeAssistantDiscovery {
    /// The node id (and device identifier) of a presence identity: one Home Assistant device per
    /// identity, whatever address it advertises from.
    func presenceNode(_ name: String) -> String { Self.sanitized(base) + "_presence_" + Self.sanitized(name) }

    /// A presence identity's configs: a `device_tracker` (source type `bluetooth_le`, `home` /
    /// `not_home` from `<base>/presence/<name>`'s `state`, the message's members as attributes),
    /// and distance, room and RSSI sensors, under one device of the identity.
    func presenceConfigs(_ name: String) -> [DiscoveryConfig] {
        let node = presenceNode(name)
        let stateTopic = base + "/presence/" + name
        let device: JSONValue = .object([
            ("identifiers", .array([.string(node)])),
            ("name", .string(name)),
            ("model", .string("Presence identity")),
            ("manufacturer", .string("gattway")),
            ("via_device", .string(bridgeNode)),
        ])
        let availability: [(key: String, value: JSONValue)] =
            fleetGateway == nil
            ? [
                (
                    "availability",
                    .array([
                        .object([
                            ("topic", .string(bridge + "/state")),
                            ("value_template", .string("{{ value_json.state }}")),
                        ])
                    ])
                )
            ] : []
        func entity(
            _ component: String, _ object: String, _ entityName: JSONValue, _ members: [(key: String, value: JSONValue)]
        )
            -> DiscoveryConfig
        {
            var payload: [(key: String, value: JSONValue)] = [
                ("name", entityName), ("unique_id", .string("\(node)_\(object)")),
                ("state_topic", .string(stateTopic)),
            ]
            payload += members + availability
            payload += [
                ("device", device),
                ("origin", .object([("name", .string("gattway")), ("sw", .string(version))])),
            ]
            return DiscoveryConfig(
                component: component, topic: "\(settings.discoveryPrefix)/\(component)/\(node)/\(object)/config",
                payload: .object(payload))
        }
        return [
            entity(
                "device_tracker", "tracker", .null,
                [
                    ("value_template", .string("{{ value_json.state }}")),
                    ("payload_home", .string("home")), ("payload_not_home", .string("not_home")),
                    ("source_type", .string("bluetooth_le")), ("json_attributes_topic", .string(stateTopic)),
                ]),
            entity(
                "sensor", "distance", .string("Distance"),
                [
                    ("value_template", .string("{{ value_json.distance }}")),
                    ("unit_of_measurement", .string("m")), ("device_class", .string("distance")),
                    ("state_class", .string("measurement")), ("suggested_display_precision", .number(1)),
                ]),
            entity("sensor", "room", .string("Room"), [("value_template", .string("{{ value_json.room }}"))]),
            entity(
                "sensor", "rssi", .string("RSSI"),
                [
                    ("value_template", .string("{{ value_json.rssi }}")),
                    ("unit_of_measurement", .string("dBm")), ("device_class", .string("signal_strength")),
                    ("state_class", .string("measurement")), ("entity_category", .string("diagnostic")),
                ]),
        ]
    }
}

extension HomeAssistantPublisher {
    /// A presence identity's configs (``HomeAssistantDiscovery/presenceConfigs(_:)``), retained.
    func publishPresence(_ name: String) {
        guard let discovery else { return }
        for config in discovery.presenceConfigs(name) {
            context.output.publish(config.topic, json: config.payload, retain: true, kind: .republished)
        }
    }
}
