import Bluetooth
import JSON

/// The bridge topics: `bridge/state`, `bridge/info` and `bridge/devices` (retained) and
/// `bridge/event`. `bridge/devices` goes out at most once a second: with rotating addresses the
/// list changes constantly. Loop-confined.
final class BridgePublisher {
    private let context: CoreContext
    private let version: String
    /// Where the fields of a `bridge/devices` entry live.
    private let registry: DeviceRegistry
    private let connections: ConnectionManager
    private let states: DeviceStates
    /// When `bridge/devices` last went out, and whether a change waits for the next slot.
    private var devicesPublishedAt: Double?
    private var devicesPending = false
    /// The bytes per entry of the last `bridge/devices`, to size the next one's buffer.
    private var devicesEntryBytes = BridgePublisher.devicesEntryEstimate
    /// The adapter's condition as the port last told it (nil: not told yet).
    private(set) var adapter: BLEAdapterStatus?
    /// Told each change of ``adapter`` (`gattway run`: systemd's `STATUS=`).
    private let adapterObserver: (@Sendable (BLEAdapterStatus) -> Void)?

    /// Interval between two `bridge/devices` publications, in seconds.
    static let devicesInterval = 1.0

    /// About the bytes of one `bridge/devices` entry of an advertising sensor (the first list's
    /// estimate; later ones use the last list's average).
    static let devicesEntryEstimate = 128

    init(
        context: CoreContext, version: String, registry: DeviceRegistry, connections: ConnectionManager,
        states: DeviceStates, adapterObserver: (@Sendable (BLEAdapterStatus) -> Void)? = nil
    ) {
        self.adapterObserver = adapterObserver
        self.context = context
        self.version = version
        self.registry = registry
        self.connections = connections
        self.states = states
    }

    private var base: String { context.base }
    private var bridge: String { context.bridge }

    /// `bridge/state` online, `bridge/info` and `bridge/devices`, all retained.
    func publishOnline() {
        context.output.publish(
            bridge + "/state", Array(#"{"state":"online"}"#.utf8), retain: true, kind: .republished)
        context.output.publish(bridge + "/info", json: info, retain: true, kind: .republished)
        devicesChanged()
    }

    var info: JSONValue {
        let config = context.config
        return .object([
            ("version", .string(version)),
            ("base_topic", .string(base)),
            ("adapter", .string(config.bluetooth.adapter)),
            ("adapters", .array(config.bluetooth.adapters.map { .string($0) })),
            (
                "config",
                .object([
                    ("scan_services", .array(config.bluetooth.scanServices.map { .string($0.shortDescription) })),
                    ("max_connections", .number(Double(config.bluetooth.maxConnections))),
                    ("device_rules", .number(Double(config.devices.count))),
                    ("parsers", .array(config.parsers.map { .string($0.name) })),
                    ("qos", .number(Double(config.mqtt.qos))),
                    ("retain", .bool(config.mqtt.retain)),
                    ("availability", .bool(config.availability.enabled)),
                    ("homeassistant", .bool(config.homeAssistant.enabled)),
                    ("store_and_forward", .bool(config.storeAndForward.enabled)),
                ])
            ),
        ])
    }

    /// The device list changed: the first change goes out at once; further changes within
    /// ``devicesInterval`` are merged into one publication at its end.
    func devicesChanged() {
        let now = context.clock.now()
        if let last = devicesPublishedAt, now - last < Self.devicesInterval {
            devicesPending = true
            context.due(at: last + Self.devicesInterval)
            return
        }
        publishDevices(at: now)
    }

    /// Publishes a pending `bridge/devices` change when its slot has come.
    func tick(now: Double) {
        guard devicesPending, let last = devicesPublishedAt, now - last >= Self.devicesInterval else { return }
        publishDevices(at: now)
    }

    /// The deadline of a pending `bridge/devices` publication, for the timer.
    var nextDeadline: Double? {
        guard devicesPending, let last = devicesPublishedAt else { return nil }
        return last + Self.devicesInterval
    }

    private func publishDevices(at now: Double) {
        devicesPending = false
        devicesPublishedAt = now
        // Written entry by entry (a JSONValue tree of all 1,000 devices at once was ~0.35 MB more at
        // each publication), into its own buffer that becomes the message: a shared buffer would
        // keep a list-sized capacity, and a copy would need the list's size twice. The buffer is
        // sized from the last list's entries (plus a little): an estimate that falls short doubles
        // the buffer while the list is written and then needs an exact copy — three list-sized
        // buffers at once instead of one.
        var bytes: [UInt8] = []
        let count = registry.count
        bytes.reserveCapacity(2 + count * (devicesEntryBytes + devicesEntryBytes / 16))
        bytes.append(UInt8(ascii: "["))
        for (position, id) in registry.order.enumerated() {
            if position > 0 { bytes.append(UInt8(ascii: ",")) }
            let device = registry[id]
            Self.deviceEntry(
                device, connected: connections.isConnected(device.address), format: states.format(id),
                services: registry.services(id)
            ).write(into: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
        if count > 0 { devicesEntryBytes = max(16, bytes.count / count) }
        // The estimate was far off: keep an exact copy.
        if bytes.capacity - bytes.count > bytes.count / 4 { bytes = Output.exactCopy(bytes) }
        context.output.publish(bridge + "/devices", owned: bytes, retain: true, kind: .republished)
    }

    /// One `bridge/devices` entry: `{"name","address","local_name"?,"rssi","connected",
    /// "services","format"?,"rule"}`.
    static func deviceEntry(_ device: DeviceRecord, connected: Bool, format: String?, services: [BluetoothUUID])
        -> JSONValue
    {
        var members: [(key: String, value: JSONValue)] = [
            ("name", .string(device.name)),
            ("address", .string(device.address.description)),
        ]
        if let localName = device.localName { members.append(("local_name", .string(localName))) }
        members.append(("rssi", device.rssi.map { .number(Double($0)) } ?? .null))
        members.append(("connected", .bool(connected)))
        members.append(("services", .array(services.map { .string($0.shortDescription) })))
        if let format { members.append(("format", .string(format))) }
        members.append(("rule", .number(Double(device.ruleIndex))))
        return .object(members)
    }

    /// The adapter's condition changed: logged once (a warning while it cannot be used, with
    /// what to do), and `bridge/event` `adapter_state` — except for an adapter that is powered
    /// on at the start, which is the normal case.
    func adapterChanged(_ status: BLEAdapterStatus) {
        guard status != adapter else { return }
        let first = adapter == nil
        adapter = status
        adapterObserver?(status)
        if status.usable {
            context.log(.notice, "adapter: \(status.message)" + (first ? "" : "; scanning and connecting again"))
        } else {
            context.log(
                .warning, "adapter: \(status.text); scanning and connecting start by themselves once it can be used")
        }
        guard !(first && status.usable) else { return }
        context.output.publish(
            bridge + "/event",
            json: .object([("type", .string("adapter_state")), ("data", .object(adapterMembers(status)))]),
            retain: false)
    }

    /// `{"adapter","state","message","fix"}` of `bridge/event` `adapter_state` and of
    /// `bridge/health` `adapter` (`fix` null when nothing needs doing).
    func adapterMembers(_ status: BLEAdapterStatus) -> [(key: String, value: JSONValue)] {
        [
            ("adapter", .string(status.adapter)), ("state", .string(status.state)),
            ("message", .string(status.message)), ("fix", status.fix.map(JSONValue.string) ?? .null),
        ]
    }

    /// `bridge/event`: `{"type":"device_connected","data":{"name":…,"address":…}}`.
    func event(_ type: String, _ device: DeviceRecord, error: String? = nil) {
        Self.event(type, name: device.name, address: device.address, error: error, context: context)
    }

    /// `bridge/event` about a device, from a feature that reports one itself (the readings' key
    /// problems).
    static func event(
        _ type: String, name: String, address: BluetoothAddress, error: String? = nil, context: CoreContext
    ) {
        var data: [(key: String, value: JSONValue)] = [
            ("name", .string(name)), ("address", .string(address.description)),
        ]
        if let error { data.append(("error", .string(error))) }
        context.output.publish(
            context.bridge + "/event", json: .object([("type", .string(type)), ("data", .object(data))]),
            retain: false)
    }
}
