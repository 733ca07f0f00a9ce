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
    public func handle(peripheralSource message: MQTTInboundMessage) async {
        guard let port = peripheral else { return }
        let settings = config.peripheral
        for (serviceIndex, service) in settings.services.enumerated() {
            for (index, characteristic) in service.characteristics.enumerated() {
                guard let source = characteristic.source, source.topic == message.topic else { continue }
                let id = PeripheralCharacteristicID(service: serviceIndex, characteristic: index)
                guard let value = sourceValue(source, message, what: "\(service.uuid.shortDescription)/\(characteristic.uuid.shortDescription)")
                else { continue }
                guard served.values[id] != value else { continue }
                served.values[id] = value
                served.updates += 1
                await port.setValue(value, for: id)
            }
        }
        var data = served.advertisingData
        var changed = false
        let advertising = settings.advertising
        let fields = advertising.manufacturerData.enumerated().map { (PeripheralDataID.manufacturer($0.offset), $0.element.data) }
            + advertising.serviceData.enumerated().map { (PeripheralDataID.service($0.offset), $0.element.data) }
        for (id, field) in fields {
            guard let source = field.source, source.topic == message.topic,
                let value = sourceValue(source, message, what: "advertising \(id)"), data[id] != value
            else { continue }
            data[id] = value
            changed = true
        }
        guard changed, let advertisement = PeripheralState.advertisement(settings, data: data) else { return }
        do {
            try await port.advertise(advertisement)
            served.advertisingData = data
            served.advertisement = advertisement
        } catch {
            served.advertisingErrors += 1
            log(.warning, "peripheral: advertising the value of \(message.topic) failed, the previous advertisement stays: \(error)")
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
            if characteristic.source == nil, served.values[id] != value {
                served.values[id] = value
                await peripheral?.setValue(value, for: id)
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
