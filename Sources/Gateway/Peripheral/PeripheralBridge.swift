import Bluetooth
import JSON

/// The peripheral role's bridge (docs/peripheral.md): serves the configured GATT services,
/// advertises, follows the `from_topic` topics into served values and advertising data, and
/// publishes what centrals write to `to_topic`. Port calls that take time (`setValue`,
/// `advertise`) are jobs; the served state changes first, and each job's completion hands the
/// port the newest value if it moved on meanwhile. Loop-confined.
final class PeripheralBridge {
    /// For `bridge/health`.
    struct Statistics {
        var updates: Int
        var writes: Int
        var subscriptions: Int
        var advertising: Bool
        var advertisingErrors: Int
        var valueErrors: Int
    }

    private let context: CoreContext
    let port: any PeripheralPort
    private var served = PeripheralState()
    /// Characteristics whose value is with the port now (a `setValue` job runs).
    private var pushing: Set<PeripheralCharacteristicID> = []
    /// An `advertise` job runs.
    private var advertising = false

    init(context: CoreContext, port: any PeripheralPort) {
        self.context = context
        self.port = port
    }

    private var settings: PeripheralSettings { context.config.peripheral }

    var statistics: Statistics {
        Statistics(
            updates: served.updates, writes: served.writes,
            subscriptions: served.subscribers.values.reduce(0) { $0 + $1.count },
            advertising: served.advertisement != nil, advertisingErrors: served.advertisingErrors,
            valueErrors: served.valueErrors)
    }

    /// The value a served characteristic has now (what a central reads).
    func value(_ id: PeripheralCharacteristicID) -> [UInt8]? { served.values[id] }

    /// Serves the configured GATT services and starts advertising; throws
    /// ``GatewayStartError`` when the port refuses. Runs on the caller's actor (the gateway).
    func start(isolation: isolated (any Actor)? = #isolation) async throws(GatewayStartError) {
        let services = PeripheralState.services(settings)
        for (serviceIndex, service) in services.enumerated() {
            for (index, characteristic) in service.characteristics.enumerated() {
                served.values[PeripheralCharacteristicID(service: serviceIndex, characteristic: index)] =
                    characteristic.value
            }
        }
        if !services.isEmpty {
            do {
                try await port.serve(services)
            } catch {
                throw GatewayStartError(
                    "peripheral: cannot serve the GATT services: \(error)",
                    isConfiguration: error.kind == .invalidConfiguration)
            }
            context.log(
                .notice,
                "peripheral: serving \(services.count) service(s): \(services.map(\.uuid.shortDescription).joined(separator: ", "))"
            )
        }
        served.advertisement = PeripheralState.advertisement(settings, data: [:])
        if let advertisement = served.advertisement {
            do {
                try await port.advertise(advertisement)
            } catch {
                throw GatewayStartError(
                    "peripheral: cannot advertise: \(error)", isConfiguration: error.kind == .invalidConfiguration)
            }
            context.log(
                .notice, "peripheral: advertising" + (advertisement.data.localName.map { " as \"\($0)\"" } ?? ""))
        }
    }

    /// A message on a `from_topic`: every characteristic and advertising field that follows the
    /// topic takes the new value. A payload that does not fit is logged and counted
    /// (`dropped.peripheral_value`); the previous value stays.
    func source(_ message: MQTTInboundMessage) {
        for (serviceIndex, service) in settings.services.enumerated() {
            for (index, characteristic) in service.characteristics.enumerated() {
                guard let source = characteristic.source, source.topic == message.topic else { continue }
                let id = PeripheralCharacteristicID(service: serviceIndex, characteristic: index)
                guard
                    let value = sourceValue(
                        source, message,
                        what: "\(service.uuid.shortDescription)/\(characteristic.uuid.shortDescription)"),
                    served.values[id] != value
                else { continue }
                served.values[id] = value
                served.updates += 1
                push(id)
            }
        }
        var data = served.wantedAdvertisingData
        var changed = false
        let advertising = settings.advertising
        let fields =
            advertising.manufacturerData.enumerated().map {
                (PeripheralDataID.manufacturer($0.offset), $0.element.data)
            }
            + advertising.serviceData.enumerated().map { (PeripheralDataID.service($0.offset), $0.element.data) }
        for (id, field) in fields {
            guard let source = field.source, source.topic == message.topic,
                let value = sourceValue(source, message, what: "advertising \(id)"), data[id] != value
            else { continue }
            data[id] = value
            changed = true
        }
        guard changed else { return }
        served.pendingAdvertisingData = data
        advertise(topic: message.topic)
    }

    private func sourceValue(_ source: PeripheralValueSource, _ message: MQTTInboundMessage, what: String) -> [UInt8]? {
        do {
            return try source.bytes(from: message.payload)
        } catch {
            served.valueErrors += 1
            context.log(
                .warning,
                "peripheral: \(message.topic) → \(what): \(error) (payload \(String(decoding: message.payload.prefix(64), as: UTF8.self)))"
            )
            return nil
        }
    }

    /// Hands the port the characteristic's served value, unless a hand-off of it runs (its
    /// completion hands the newest value then).
    private func push(_ id: PeripheralCharacteristicID) {
        guard !pushing.contains(id), let value = served.values[id] else { return }
        pushing.insert(id)
        let port = self.port
        context.jobs.spawn {
            await port.setValue(value, for: id)
            return .servedValue(id, sent: value)
        }
    }

    /// The port took `sent` for `id`: when the served value moved on meanwhile, it gets that too.
    func valueSent(_ id: PeripheralCharacteristicID, sent: [UInt8]) {
        pushing.remove(id)
        if served.values[id] != sent { push(id) }
    }

    /// Advertises the pending advertising data, unless an `advertise` job runs (its completion
    /// advertises what is pending then).
    private func advertise(topic: String) {
        guard !advertising, let data = served.pendingAdvertisingData else { return }
        guard let advertisement = PeripheralState.advertisement(settings, data: data) else {
            served.pendingAdvertisingData = nil
            return
        }
        advertising = true
        let port = self.port
        let attempt = AdvertisedData(data: data, advertisement: advertisement, topic: topic)
        context.jobs.spawn {
            do throws(BLEPortError) {
                try await port.advertise(advertisement)
                return .advertised(attempt, error: nil)
            } catch {
                return .advertised(attempt, error: error)
            }
        }
    }

    /// An `advertise` job ended: a refused advertisement is logged and counted and the previous
    /// one stays; newer data that arrived meanwhile is advertised next.
    func advertised(_ attempt: AdvertisedData, error: BLEPortError?) {
        advertising = false
        if let error {
            served.advertisingErrors += 1
            context.log(
                .warning,
                "peripheral: advertising the value of \(attempt.topic) failed, the previous advertisement stays: \(error)"
            )
        } else {
            served.advertisingData = attempt.data
            served.advertisement = attempt.advertisement
        }
        if served.pendingAdvertisingData == attempt.data { served.pendingAdvertisingData = nil }
        advertise(topic: attempt.topic)
    }

    /// A central wrote or (un)subscribed: writes go to `to_topic` as
    /// `{"central", "service", "characteristic", "value", "hex", "timestamp"}` and, on a
    /// characteristic not fed from MQTT, become its value; subscriptions are logged.
    func event(_ event: PeripheralPortEvent) {
        switch event {
        case .write(let id, let value, let central):
            guard let (service, characteristic) = characteristic(id) else { return }
            served.writes += 1
            let who = central?.description ?? "a central"
            context.log(
                .info,
                "peripheral: \(who) wrote \(Hex.encode(value)) to \(service.uuid.shortDescription)/\(characteristic.uuid.shortDescription)"
            )
            if characteristic.source == nil, served.values[id] != value {
                served.values[id] = value
                push(id)
            }
            guard let topic = characteristic.writeTopic else { return }
            context.output.publish(
                topic,
                json: .object([
                    ("central", central.map { .string($0.description) } ?? .null),
                    ("service", .string(service.uuid.shortDescription)),
                    ("characteristic", .string(characteristic.uuid.shortDescription)),
                    ("value", characteristic.encoding.decode(value) ?? .null),
                    ("hex", .string(Hex.encode(value))),
                    ("timestamp", .string(HealthReporter.isoText(context.clock.wallMilliseconds()))),
                ]), retain: false)
        case .subscribed(let id, let central):
            guard let (_, characteristic) = characteristic(id) else { return }
            served.subscribers[id, default: []].insert(central)
            context.log(
                .info,
                "peripheral: \(central?.description ?? "a central") subscribed to \(characteristic.uuid.shortDescription)"
            )
        case .unsubscribed(let id, let central):
            guard let (_, characteristic) = characteristic(id) else { return }
            served.subscribers[id]?.remove(central)
            context.log(
                .info,
                "peripheral: \(central?.description ?? "a central") unsubscribed from \(characteristic.uuid.shortDescription)"
            )
        }
    }

    private func characteristic(_ id: PeripheralCharacteristicID) -> (
        PeripheralServiceSettings, PeripheralCharacteristicSettings
    )? {
        let services = settings.services
        guard services.indices.contains(id.service),
            services[id.service].characteristics.indices.contains(id.characteristic)
        else {
            context.log(.warning, "peripheral: an event for unknown \(id) ignored")
            return nil
        }
        return (services[id.service], services[id.service].characteristics[id.characteristic])
    }
}

/// An advertisement handed to the peripheral port, with the MQTT-fed data it carries and the
/// topic that changed it (for the log).
struct AdvertisedData: Sendable {
    var data: [PeripheralDataID: [UInt8]]
    var advertisement: PeripheralAdvertisement
    var topic: String
}
