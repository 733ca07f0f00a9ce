import Bluetooth
import DBus
import EventLoop
import JSON
import Retry

/// One remote device: what it advertises and when (its own generators and timing), bluetoothd's
/// cache of it, the link and pairing (SimulatedDevice+Link.swift) and its remote GATT database.
/// Not Sendable: owned by the ``BlueZSimulator`` actor and touched only in its isolation (its
/// methods and the loop timers it arms, which run on the actor's executor).
final class SimulatedDevice {
    /// The link as BlueZ sees it.
    enum Link {
        case disconnected
        /// Connect() waits for `reply`; `timer` ends the attempt.
        case connecting(reply: DBusPendingReply, timer: EventLoop.Token)
        case connected
        /// Disconnect() callers wait for BlueZ's disconnect timer.
        case disconnecting(replies: [DBusPendingReply], timer: EventLoop.Token)
    }

    var spec: DeviceSpec
    let path: DBusObjectPath
    let adapter: SimulatedAdapter
    var layout: GATTLayout
    var characteristics: [SimulatedCharacteristic] = []
    /// Set when this device is another (linked) adapter of the simulator: what it advertises
    /// and whose GATT applications its database holds.
    var mirror: MirrorState?
    /// The device object on the other side of a link between two simulated adapters.
    var linkedTo: DBusObjectPath?

    /// Device1 is exported (the device was seen in a scan, or connected).
    var exported = false
    var gattExported = false
    /// Removed 30 s after the last report (until Connect() makes it permanent).
    var temporary = true
    var cache = AdvertisementCache()
    var alias: String?
    var trusted = false
    var blocked = false
    var servicesResolved = false
    var resolvedOnce = false
    var link = Link.disconnected
    /// The connection parameters of the link while it is up (Load Connection Parameters' entry
    /// for the device when it came up, else the kernel's defaults); the interval is the maximum,
    /// as the kernel's virtual controllers choose it.
    var linkParameters: ConnectionParameters?
    /// `Paired` and `Bonded` (one flag: LE pairing here always bonds).
    var paired = false
    /// A `Pair()` waiting for its end: the SMP exchange's timer, or the agent's question.
    var pairing: (reply: DBusPendingReply, timer: EventLoop.Token?)?
    /// The agent asked for the running `Pair()` (its owner and path): told `Cancel` when the
    /// pairing ends before the agent answered.
    var pairingAgent: (owner: String, path: DBusObjectPath)?
    /// Counts `Pair()` calls: an agent's late answer to an earlier one is dropped.
    var pairingAttempt = 0
    var remainingConnectFailures: Int
    /// The pending Connect() was made while the device did not advertise connectably (and is
    /// not `unreachable`): like the kernel's create-connection, it comes up once it does.
    var connectAwaitsAdvertisement = false
    var lastReportConnectable = true
    /// Advertising reports made so far (``ReportTime/sequence``).
    var reportsMade = 0

    var temporaryTimer: EventLoop.Token?
    var linkTimer: EventLoop.Token?
    var resolveTimer: EventLoop.Token?
    /// ATT traffic waiting for the air (`timing.connection_interval` > 0; SimulatedDevice+Air.swift).
    var air = AirQueue()

    var rng: SplitMix64
    /// When the device advertises (its first event's phase, each event's advDelay), apart from
    /// `rng` (what it advertises), so the one does not shift the other's draws.
    var timingRNG: SplitMix64
    let deviceSeed: UInt64
    var manufacturerData: [(UInt16, PayloadGenerator)]
    var serviceData: [(BluetoothUUID, PayloadGenerator)]

    init(spec: DeviceSpec, adapter: SimulatedAdapter, seed: UInt64, layout: GATTLayout? = nil) throws {
        self.spec = spec
        self.adapter = adapter
        path = try adapter.path.appending(spec.address.bluezPathComponent)
        self.layout = layout ?? GATTLayout(spec.services, name: spec.name)
        remainingConnectFailures = spec.faults.connectFailures
        let deviceSeed = seed ^ spec.address.rawValue
        self.deviceSeed = deviceSeed
        rng = SplitMix64(seed: deviceSeed)
        timingRNG = SplitMix64(seed: deviceSeed ^ 0x5EED_0000_7141_0000)
        manufacturerData = spec.manufacturerData.enumerated().map { index, entry in
            (
                entry.companyID,
                PayloadGenerator(entry.payload, seed: deviceSeed &+ UInt64(index) &+ 1, address: spec.address)
            )
        }
        serviceData = spec.serviceData.enumerated().map { index, entry in
            (
                entry.uuid,
                PayloadGenerator(entry.payload, seed: deviceSeed &+ UInt64(index) &+ 101, address: spec.address)
            )
        }
        try buildCharacteristics()
    }

    /// (Re)creates the characteristics from `layout`.
    func buildCharacteristics() throws {
        let deviceSeed = self.deviceSeed
        characteristics = []
        for service in layout.services where service.exported {
            let servicePath = try path.appending(GATTLayout.element("service", service.handle))
            for characteristic in service.characteristics {
                characteristics.append(
                    try SimulatedCharacteristic(
                        layout: characteristic, servicePath: servicePath, serviceUUID: service.uuid,
                        seed: deviceSeed &+ UInt64(characteristic.handle) &* 31, address: spec.address))
            }
        }
    }

    var isConnected: Bool {
        if case .connected = link { return true }
        if case .disconnecting = link { return true }
        return false
    }

    /// `Alias`: the user's alias, else the name, else the address with dashes.
    var aliasValue: String {
        alias ?? cache.name ?? spec.address.description.replacing(":", with: "-")
    }

    /// `UUIDs`: advertised ones until services were resolved once, then the remote services.
    var uuidsValue: [String] {
        resolvedOnce ? layout.serviceUUIDs : cache.uuids.map(\.description)
    }

    /// Seconds from a scan start (or the device's arrival during one) to its first advertising
    /// event: a random phase of its interval, as a radio's advertisers are not synchronised
    /// with the scan nor with each other.
    func randomPhase() -> Double { timingRNG.unit() * spec.interval }

    /// advDelay (Core spec Vol 6 Part B 4.4.2.2.1): every advertising event comes a pseudo-random
    /// 0–10 ms after advInterval, so advertisers with one interval drift apart.
    func advertisingDelay() -> Double { timingRNG.unit() * DeviceSpec.maxAdvertisingDelay }

    /// The wall-clock slot of the last report of an aligned device (``DeviceSpec/aligned``).
    var lastSlot: Int64?

    /// Brings an aligned device's payload generators to `slot`: the advertisements skipped since
    /// the last one (modulo 256; all 256 minus one would be a whole turn of a byte counter).
    func advance(to slot: Int64) {
        let skipped = lastSlot.map { max(0, min(255, slot - $0 - 1)) } ?? (slot % 256 + 256) % 256
        lastSlot = slot
        guard skipped > 0 else { return }
        for _ in 0..<skipped {
            for index in manufacturerData.indices { _ = manufacturerData[index].1.next() }
            for index in serviceData.indices { _ = serviceData[index].1.next() }
        }
    }

    /// The delay from the moment a scan starts to hear the device (the scan began, or it came into
    /// range during one; `wall` is that moment on the wall clock) to its first advertising event:
    /// an aligned device's next slot of its interval, any other's random phase of it.
    func firstEventDelay(wall: Double) -> Double {
        spec.aligned ? AdvertisingClock.slot(spec.interval, wall: wall).untilNext : randomPhase()
    }

    /// Takes the advertising event due at `due` and handled at `now` (`wall` on the wall clock):
    /// an aligned device's generators go to this slot; returns when its next event is due — the
    /// next slot, else advInterval + advDelay after this one was due. When the loop fell behind
    /// by more than that, the events missed are skipped, not sent in a catch-up burst, and the
    /// next one keeps the device's own phase (a whole number of intervals later): a stall of the
    /// loop must not line every overdue device up at the same `now`, as a radio's advertisers
    /// stay at their random phases whatever a scanner does.
    func takeAdvertisingEvent(due: UInt64, now: UInt64, wall: Double) -> UInt64 {
        if spec.aligned {
            let (slot, untilNext) = AdvertisingClock.slot(spec.interval, wall: wall)
            advance(to: slot)
            return AdvertisingClock.later(now, by: untilNext)
        }
        let next = AdvertisingClock.later(due, by: spec.interval + advertisingDelay())
        guard next < now else { return next }
        let period = max(UInt64(saturating: spec.interval * 1e9), 1)
        let missed = (now - next) / period + 1
        let (skipped, overflow) = missed.multipliedReportingOverflow(by: period)
        let (kept, beyond) = next.addingReportingOverflow(skipped)
        return overflow || beyond ? now : kept
    }

    /// The next advertising report (generators advance; a linked adapter's advertisements take turns).
    func makeReport() -> AdvertisementReport {
        if var mirror, !mirror.reports.isEmpty {
            var report = mirror.reports[mirror.next % mirror.reports.count]
            mirror.next &+= 1
            self.mirror = mirror
            report.rssi = Int16(saturating: min(max(spec.rssi.rounded(), -127), 20))
            return report
        }
        var rssi = spec.rssi
        if spec.rssiJitter > 0 {
            let unit = Double(rng.next() >> 11) / Double(1 << 53)
            rssi += (unit * 2 - 1) * spec.rssiJitter
        }
        let clamped = Int16(saturating: min(max(rssi.rounded(), -127), 20))
        return AdvertisementReport(
            rssi: clamped, txPower: spec.txPower.map { Int16($0) }, name: spec.name, serviceUUIDs: spec.serviceUUIDs,
            manufacturerData: manufacturerData.indices.map { (manufacturerData[$0].0, manufacturerData[$0].1.next()) },
            serviceData: serviceData.indices.map { (serviceData[$0].0, serviceData[$0].1.next()) })
    }

    /// bluetoothd receives `report` (`btd_adapter_update_found_device`): nil when the scan's
    /// merged filter drops it; otherwise the cache takes it and the `Device1` properties it
    /// changed are returned (``propertyChanges(_:)`` gives their values).
    func receive(_ report: AdvertisementReport, filter: MergedDiscoveryFilter) -> AdvertisedProperties? {
        guard
            filter.admits(
                address: spec.address, name: report.name, serviceUUIDs: report.serviceUUIDs, rssi: report.rssi,
                discoverable: spec.discoverable)
        else { return nil }
        lastReportConnectable = spec.connectable
        return cache.apply(
            report, filteredDiscovery: filter.isFiltered, duplicateData: filter.duplicateData,
            servicesResolved: resolvedOnce)
    }

    /// The `Device1` properties of `changed` with their values now (nil: gone).
    func propertyChanges(_ changed: AdvertisedProperties) -> [(String, DBusValue?)] {
        var changes: [(String, DBusValue?)] = []
        if changed.contains(.rssi) { changes.append(("RSSI", cache.rssi.map { .int16($0) })) }
        if changed.contains(.txPower) { changes.append(("TxPower", cache.txPower.map { .int16($0) })) }
        if changed.contains(.name) { changes.append(("Name", cache.name.map { .string($0) })) }
        if changed.contains(.alias) && alias == nil { changes.append(("Alias", .string(aliasValue))) }
        if changed.contains(.uuids) { changes.append(("UUIDs", .strings(uuidsValue))) }
        if changed.contains(.manufacturerData) { changes.append(("ManufacturerData", cache.manufacturerDataValue)) }
        if changed.contains(.serviceData) { changes.append(("ServiceData", cache.serviceDataValue)) }
        return changes
    }

    func characteristic(at path: DBusObjectPath) -> SimulatedCharacteristic? {
        characteristics.first { $0.path == path }
    }

    func characteristic(uuid: BluetoothUUID) -> SimulatedCharacteristic? {
        characteristics.first { $0.uuid == uuid }
    }
}

/// What a linked adapter shows of itself to the adapter that discovers it.
struct MirrorState {
    /// The advertising adapter's name.
    var peripheralAdapter: String
    /// One report per registered advertisement, sent in turn.
    var reports: [AdvertisementReport] = []
    var next = 0
    /// Attribute handle (characteristic declaration, descriptor) → the application object behind it.
    var targets: [UInt16: ApplicationObject] = [:]
}
