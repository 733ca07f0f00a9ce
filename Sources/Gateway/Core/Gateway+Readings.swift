import Bluetooth
import JSON
import Parsers

extension Gateway {
    /// One advertisement report: the hot path. Filters on the scan services and RSSI threshold,
    /// finds (or registers) the device, updates RSSI/last seen/availability, decodes the payload
    /// and publishes through rate control. A payload that fails to decode is counted and logged.
    public func handle(_ discovery: BLEDiscovery) {
        counters.advertisements += 1
        let advertisement = discovery.advertisement
        if let threshold = config.bluetooth.rssiThreshold, let rssi = advertisement.rssi, Int(rssi) < threshold {
            counters.dropped.filtered += 1
            return
        }
        let services = config.bluetooth.scanServices
        if !services.isEmpty, !services.contains(where: { advertisement.advertises($0) }) {
            counters.dropped.filtered += 1
            return
        }
        let index: Int
        if let known = indexByAddress[discovery.address] {
            index = known
        } else {
            guard let registered = register(discovery) else { return }
            index = registered
        }
        let now = clock.now()
        devices[index].lastSeenWall = clock.wallMilliseconds()
        devices[index].lastActivity = now
        if let rssi = advertisement.rssi { devices[index].rssi = Int(rssi) }
        if let name = advertisement.localName, devices[index].localName != name { devices[index].localName = name }
        if !advertisement.serviceUUIDs.isEmpty,
            let services = serviceLists.adding(advertisement.serviceUUIDs, to: devices[index].services)
        {
            devices[index].services = services
        }
        let rule = rule(index)
        if !rule.connect {
            devices[index].availability.advertisement(at: now)
            if devices[index].availability.published != true { publishAvailability(index, online: true) }
        }
        if awaitsConnection(index) { requestConnection(index, urgent: false) }
        guard rule.advertisements, !advertisement.serviceData.isEmpty || !advertisement.manufacturerData.isEmpty else { return }
        do {
            let decoded = try config.registry.decode(
                AdvertisementContext(advertisement: advertisement, address: discovery.address, bindKey: rule.bindKey))
            if attributeTable.format(devices[index].format) != decoded.format {
                devices[index].format = attributeTable.formatIndex(decoded.format)
            }
            // A recognised frame without values (a BTHome packet with only a packet id) changes nothing.
            if !decoded.readings.isEmpty {
                counters.decoded += 1
                apply(decoded.readings, to: index, now: now)
            }
        } catch {
            guard error.kind != .unknownFormat else { return }
            parseFailed(index, "advertisement", error)
        }
    }

    /// Finds the first rule matching the device and registers it; nil when no rule matches or
    /// the registry is full of devices that stay (``makeRoomForDevice()``).
    func register(_ discovery: BLEDiscovery) -> Int? {
        guard let ruleIndex = config.devices.firstIndex(where: { $0.match.matches(discovery.address, discovery.advertisement) })
        else { return nil }
        guard makeRoomForDevice() else {
            if counters.dropped.registryFull == 1 || counters.dropped.registryFull % 1000 == 0 {
                log(.warning, "device registry full (bluetooth.max_devices \(config.bluetooth.maxDevices)): \(discovery.address) not tracked; \(counters.dropped.registryFull) dropped so far")
            }
            return nil
        }
        let index = register(discovery.address, ruleIndex: ruleIndex, advertisement: discovery.advertisement)
        log(.info, "device \(devices[index].name) (\(discovery.address)) matched devices[\(ruleIndex)]")
        publishEvent("device_seen", index)
        if rule(index).connect { publishAvailability(index, online: false) }
        return index
    }

    /// Merges readings into the device state and publishes it when rate control allows. A new
    /// attribute gets its Home Assistant config first, and the state messages wait
    /// `state_delay` (all of them, in order: none is merged away).
    func apply(_ readings: [Reading], to index: Int, now: Double, force: Bool = false) {
        let added = devices[index].merge(readings, table: &attributeTable)
        if added, config.homeAssistant.enabled { publishDiscovery(index) }
        if force {
            publishState(index, now: now)
            return
        }
        switch devices[index].rate.offer(devices[index].attributes, settings: config.devices[devices[index].ruleIndex].rateControl,
                                         names: attributeTable.names, now: now) {
        case .publish: publishState(index, now: now)
        case .deferred(let until): armTimer(until)
        case .drop: counters.dropped.rateControl += 1
        }
    }

    /// Publishes `<base>/<device>` (and the attribute topics when configured).
    func publishState(_ index: Int, now: Double) {
        let rule = rule(index)
        let device = devices[index]
        let topic = stateTopic(index)
        StatePayload.write(device.attributes, names: attributeTable.names, rssi: device.rssi, lastSeen: device.lastSeenWall,
                           into: &scratch)
        let retain = rule.retain ?? config.mqtt.retain
        let qos = rule.qos ?? config.mqtt.qos
        publishStateMessage(index, topic: topic, payload: scratch, retain: retain, qos: qos)
        if rule.attributeTopics ?? config.mqtt.attributeTopics {
            for attribute in device.attributes {
                publishStateMessage(index, topic: topic + "/" + attributeTable.name(attribute.name),
                                    payload: StatePayload.plain(attribute.value),
                                    retain: retain, qos: qos)
            }
        }
        devices[index].rate.published(device.attributes, settings: rule.rateControl, now: now)
        if let next = devices[index].rate.nextDeadline(settings: rule.rateControl) { armTimer(next) }
    }

    func parseFailed(_ index: Int, _ what: String, _ error: ParseError) {
        counters.parseErrors += 1
        let message = "\(devices[index].name): \(what) not decoded: \(error)"
        // Log each distinct failure once in a row, so a device sending garbage does not flood the
        // journal, and all devices together within ``parseWarnings``.
        guard devices[index].lastError != message else { return }
        devices[index].lastError = message
        guard parseWarnings.take(now: clock.now()) else {
            parseWarningsHeld += 1
            return
        }
        let held = parseWarningsHeld
        parseWarningsHeld = 0
        log(.warning, held == 0 ? message : message + " (and \(held) more payloads not decoded and not logged since the last such line)")
    }

    /// A characteristic value from a notification or read: decode with the configured parser
    /// and publish (forced for `/get`, so the state is republished).
    func characteristicValue(_ index: Int, poll: Bool, spec specIndex: Int, value: [UInt8], force: Bool = false) {
        let rule = rule(index)
        let specs = poll ? rule.poll : rule.subscribe
        guard specs.indices.contains(specIndex) else { return }
        let spec = specs[specIndex]
        do {
            let readings = try spec.parser.decode(value)
            counters.decoded += 1
            devices[index].lastSeenWall = clock.wallMilliseconds()
            devices[index].lastActivity = clock.now()
            for reading in readings where !devices[index].sources.contains(where: { $0.attribute == reading.name }) {
                devices[index].sources.append((reading.name, poll, specIndex))
            }
            apply(readings, to: index, now: clock.now(), force: force)
        } catch {
            parseFailed(index, "\(spec.characteristic.shortDescription) value \(value.hexText)", error)
        }
    }

    func notification(_ address: BluetoothAddress, spec: Int, value: [UInt8]) {
        counters.notifications += 1
        guard let index = indexByAddress[address], devices[index].link == .connected else { return }
        characteristicValue(index, poll: false, spec: spec, value: value)
    }
}

extension [UInt8] {
    var hexText: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
