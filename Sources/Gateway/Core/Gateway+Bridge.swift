import Bluetooth
import JSON

extension Gateway {
    /// `bridge/state` online, `bridge/info` and `bridge/devices`, all retained.
    func publishBridgeOnline() {
        publish(base + "/bridge/state", Array(#"{"state":"online"}"#.utf8), retain: true, kind: .republished)
        publish(base + "/bridge/info", json: bridgeInfo, retain: true, kind: .republished)
        publishDevices()
    }

    /// After an MQTT reconnect: everything retained again (the broker may have lost it, and the
    /// last will may have set `bridge/state` offline). States are not held for Home Assistant
    /// here: an HA that lost its entities says so with `online` on its status topic (it does on
    /// every connection to the broker), and that holds them; a hold now would only delay every
    /// reading after each reconnect by `state_delay`.
    func republishRetained() {
        publishBridgeOnline()
        republishDiscovery(holdingStates: false)
        for index in devices.indices {
            if let online = devices[index].availability.published {
                devices[index].availability.published = nil
                publishAvailability(index, online: online)
            }
        }
    }

    var bridgeInfo: JSONValue {
        .object([
            ("version", .string(version)),
            ("base_topic", .string(base)),
            ("adapter", .string(config.bluetooth.adapter)),
            ("config", .object([
                ("scan_services", .array(config.bluetooth.scanServices.map { .string($0.shortDescription) })),
                ("max_connections", .number(Double(config.bluetooth.maxConnections))),
                ("device_rules", .number(Double(config.devices.count))),
                ("parsers", .array(config.parsers.map { .string($0.name) })),
                ("qos", .number(Double(config.mqtt.qos))),
                ("retain", .bool(config.mqtt.retain)),
                ("availability", .bool(config.availability.enabled)),
                ("homeassistant", .bool(config.homeAssistant.enabled)),
                ("store_and_forward", .bool(config.storeAndForward.enabled)),
            ])),
        ])
    }

    /// Interval between two `bridge/devices` publications, in seconds.
    static let devicesInterval = 1.0

    /// `bridge/devices`: every device that matched a rule. The first change goes out at once;
    /// further changes within ``devicesInterval`` are merged into one publication at its end.
    func publishDevices() {
        let now = clock.now()
        if let last = devicesPublishedAt, now - last < Self.devicesInterval {
            devicesPending = true
            armTimer(last + Self.devicesInterval)
            return
        }
        publishDevicesNow(at: now)
    }

    /// Publishes the pending `bridge/devices` change when its slot has come (from ``tick()``).
    func publishPendingDevices(at now: Double) {
        guard devicesPending, let last = devicesPublishedAt, now - last >= Self.devicesInterval else { return }
        publishDevicesNow(at: now)
    }

    /// The deadline of a pending `bridge/devices` publication, for the timer.
    var pendingDevicesDeadline: Double? {
        guard devicesPending, let last = devicesPublishedAt else { return nil }
        return last + Self.devicesInterval
    }

    private func publishDevicesNow(at now: Double) {
        devicesPending = false
        devicesPublishedAt = now
        // Written entry by entry (a JSONValue tree of all 1,000 devices at once was ~0.35 MB more at
        // each publication), into its own buffer that becomes the message: `scratch` would keep a
        // list-sized capacity, and a copy would need the list's size twice. The buffer is sized
        // from the last list's entries (plus a little): an estimate that falls short doubles the
        // buffer while the list is written and then needs an exact copy — three list-sized
        // buffers at once instead of one.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(2 + devices.count * (devicesEntryBytes + devicesEntryBytes / 16))
        bytes.append(UInt8(ascii: "["))
        for position in devices.indices {
            if position > 0 { bytes.append(UInt8(ascii: ",")) }
            Self.deviceEntry(devices[position], format: format(position), services: serviceLists.list(devices[position].services))
                .write(into: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
        if !devices.isEmpty { devicesEntryBytes = max(16, bytes.count / devices.count) }
        if bytes.capacity - bytes.count > bytes.count / 4 { bytes = Self.exactCopy(bytes) }  // the estimate was far off
        publish(base + "/bridge/devices", owned: bytes, retain: true, kind: .republished)
    }

    /// About the bytes of one `bridge/devices` entry of an advertising sensor (the first list's
    /// estimate; later ones use the last list's average).
    static let devicesEntryEstimate = 128

    /// One `bridge/devices` entry: `{"name","address","local_name"?,"rssi","connected",
    /// "services","format"?,"rule"}`.
    static func deviceEntry(_ device: DeviceRecord, format: String?, services: [BluetoothUUID]) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("name", .string(device.name)),
            ("address", .string(device.address.description)),
        ]
        if let localName = device.localName { members.append(("local_name", .string(localName))) }
        members.append(("rssi", device.rssi.map { .number(Double($0)) } ?? .null))
        members.append(("connected", .bool(device.link == .connected)))
        members.append(("services", .array(services.map { .string($0.shortDescription) })))
        if let format { members.append(("format", .string(format))) }
        members.append(("rule", .number(Double(device.ruleIndex))))
        return .object(members)
    }

    /// `bridge/event`: `{"type":"device_connected","data":{"name":…,"address":…}}`.
    func publishEvent(_ type: String, _ index: Int, error: String? = nil) {
        var data: [(key: String, value: JSONValue)] = [
            ("name", .string(devices[index].name)), ("address", .string(devices[index].address.description)),
        ]
        if let error { data.append(("error", .string(error))) }
        publish(base + "/bridge/event", json: .object([("type", .string(type)), ("data", .object(data))]), retain: false)
    }

    /// `<base>/<device>/availability`, retained, only when it changes.
    func publishAvailability(_ index: Int, online: Bool) {
        guard config.availability.enabled, devices[index].availability.published != online else { return }
        devices[index].availability.published = online
        let payload = online ? #"{"state":"online"}"# : #"{"state":"offline"}"#
        publish(stateTopic(index) + "/availability", Array(payload.utf8), retain: true, kind: .republished)
    }
}
