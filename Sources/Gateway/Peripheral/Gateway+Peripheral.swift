import Bluetooth
import JSON

extension Gateway {
    /// Serves the configured GATT services, starts advertising, follows the `from_topic` topics
    /// and publishes writes to `to_topic` (docs/peripheral.md).
    func startPeripheral(_ port: any PeripheralPort) async throws {
        let settings = config.peripheral
        let services = PeripheralState.services(settings)
        for (serviceIndex, service) in services.enumerated() {
            for (index, characteristic) in service.characteristics.enumerated() {
                served.values[PeripheralCharacteristicID(service: serviceIndex, characteristic: index)] = characteristic.value
            }
        }
        let events = port.events()
        tasks.append(Task { [weak self] in
            for await event in events { await self?.handle(event) }
        })
        if !services.isEmpty {
            do {
                try await port.serve(services)
            } catch {
                throw GatewayStartError("peripheral: cannot serve the GATT services: \(error)",
                                        isConfiguration: error.kind == .invalidConfiguration)
            }
            log(.notice, "peripheral: serving \(services.count) service(s): \(services.map(\.uuid.shortDescription).joined(separator: ", "))")
        }
        served.advertisement = PeripheralState.advertisement(settings, data: [:])
        if let advertisement = served.advertisement {
            do {
                try await port.advertise(advertisement)
            } catch {
                throw GatewayStartError("peripheral: cannot advertise: \(error)", isConfiguration: error.kind == .invalidConfiguration)
            }
            log(.notice, "peripheral: advertising" + (advertisement.data.localName.map { " as \"\($0)\"" } ?? ""))
        }
        for topic in settings.sourceTopics {
            let stream = try await mqtt.subscribe(topic)
            tasks.append(Task { [weak self] in
                for await message in stream { await self?.handle(peripheralSource: message) }
            })
        }
    }

    /// A message on a `from_topic`: every characteristic and advertising field that follows
    /// the topic takes the new value. A payload that does not fit is logged and counted
    /// (`dropped.peripheral_value`); the previous value stays.
    ///
    /// The served state changes before anything is awaited, so messages handled while an earlier
    /// one waits for the port see it; the port then gets the latest value (``pushServedValue``).
    public func handle(peripheralSource message: MQTTInboundMessage) async {
        guard let port = peripheral else { return }
        let settings = config.peripheral
        var changed: [PeripheralCharacteristicID] = []
        for (serviceIndex, service) in settings.services.enumerated() {
            for (index, characteristic) in service.characteristics.enumerated() {
                guard let source = characteristic.source, source.topic == message.topic else { continue }
                let id = PeripheralCharacteristicID(service: serviceIndex, characteristic: index)
                guard let value = sourceValue(source, message, what: "\(service.uuid.shortDescription)/\(characteristic.uuid.shortDescription)")
                else { continue }
                guard served.values[id] != value else { continue }
                served.values[id] = value
                served.updates += 1
                changed.append(id)
            }
        }
        var data = served.wantedAdvertisingData
        var advertisingChanged = false
        let advertising = settings.advertising
        let fields = advertising.manufacturerData.enumerated().map { (PeripheralDataID.manufacturer($0.offset), $0.element.data) }
            + advertising.serviceData.enumerated().map { (PeripheralDataID.service($0.offset), $0.element.data) }
        for (id, field) in fields {
            guard let source = field.source, source.topic == message.topic,
                let value = sourceValue(source, message, what: "advertising \(id)"), data[id] != value
            else { continue }
            data[id] = value
            advertisingChanged = true
        }
        if advertisingChanged { served.pendingAdvertisingData = data }
        for id in changed { await pushServedValue(id, to: port) }
        if advertisingChanged { await pushAdvertisement(to: port, topic: message.topic) }
    }

    /// Hands the port the characteristic's served value until what it was given last is the
    /// value served now: a message handled while this one waited changed it, and its own push
    /// may have reached the port first.
    func pushServedValue(_ id: PeripheralCharacteristicID, to port: any PeripheralPort) async {
        var sent: [UInt8]?
        while let value = served.values[id], value != sent {
            await port.setValue(value, for: id)
            sent = value
        }
    }

    /// Advertises the pending advertising data until none is pending; a refused advertisement
    /// is logged and counted, and the previous one stays.
    func pushAdvertisement(to port: any PeripheralPort, topic: String) async {
        while let data = served.pendingAdvertisingData {
            guard let advertisement = PeripheralState.advertisement(config.peripheral, data: data) else {
                served.pendingAdvertisingData = nil
                return
            }
            do {
                try await port.advertise(advertisement)
                served.advertisingData = data
                served.advertisement = advertisement
            } catch {
                served.advertisingErrors += 1
                log(.warning, "peripheral: advertising the value of \(topic) failed, the previous advertisement stays: \(error)")
            }
            // Newer data arrived while the port worked: advertise that next.
            if served.pendingAdvertisingData == data { served.pendingAdvertisingData = nil }
        }
    }

    private func sourceValue(_ source: PeripheralValueSource, _ message: MQTTInboundMessage, what: String) -> [UInt8]? {
        do {
            return try source.bytes(from: message.payload)
        } catch {
            served.valueErrors += 1
            log(.warning, "peripheral: \(message.topic) → \(what): \(error) (payload \(String(decoding: message.payload.prefix(64), as: UTF8.self)))")
            return nil
        }
    }

    /// A central wrote or (un)subscribed: writes go to `to_topic` as
    /// `{"central", "service", "characteristic", "value", "hex"}` and, on a characteristic not
    /// fed from MQTT, become its value; subscriptions are logged.
    public func handle(_ event: PeripheralPortEvent) async {
        switch event {
        case .write(let id, let value, let central):
            guard let (service, characteristic) = peripheralCharacteristic(id) else { return }
            served.writes += 1
            let who = central?.description ?? "a central"
            log(.info, "peripheral: \(who) wrote \(value.hexText) to \(service.uuid.shortDescription)/\(characteristic.uuid.shortDescription)")
            if characteristic.source == nil, served.values[id] != value, let port = peripheral {
                served.values[id] = value
                await pushServedValue(id, to: port)
            }
            guard let topic = characteristic.writeTopic else { return }
            publish(topic, json: .object([
                ("central", central.map { .string($0.description) } ?? .null),
                ("service", .string(service.uuid.shortDescription)),
                ("characteristic", .string(characteristic.uuid.shortDescription)),
                ("value", characteristic.encoding.decode(value) ?? .null),
                ("hex", .string(value.hexText)),
                ("timestamp", .string(Self.isoText(clock.wallMilliseconds()))),
            ]), retain: false)
        case .subscribed(let id, let central):
            guard let (_, characteristic) = peripheralCharacteristic(id) else { return }
            served.subscribers[id, default: []].insert(central)
            log(.info, "peripheral: \(central?.description ?? "a central") subscribed to \(characteristic.uuid.shortDescription)")
        case .unsubscribed(let id, let central):
            guard let (_, characteristic) = peripheralCharacteristic(id) else { return }
            served.subscribers[id]?.remove(central)
            log(.info, "peripheral: \(central?.description ?? "a central") unsubscribed from \(characteristic.uuid.shortDescription)")
        }
    }

    private func peripheralCharacteristic(_ id: PeripheralCharacteristicID)
        -> (PeripheralServiceSettings, PeripheralCharacteristicSettings)? {
        let services = config.peripheral.services
        guard services.indices.contains(id.service), services[id.service].characteristics.indices.contains(id.characteristic) else {
            log(.warning, "peripheral: an event for unknown \(id) ignored")
            return nil
        }
        return (services[id.service], services[id.service].characteristics[id.characteristic])
    }

    /// The value a served characteristic has now (what a central reads).
    public func servedValue(_ id: PeripheralCharacteristicID) -> [UInt8]? { served.values[id] }
}
