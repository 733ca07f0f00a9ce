import Bluetooth
import DBus
import Foundation
import Testing

@testable import BlueZSimulator

/// The simulator's per-object types without a bus: what each decides from its own state.
@Suite("Simulator objects: a device's link, pairing, advertising and reception; an adapter's registrations")
struct SimulatorObjectTests {
    static let adapterSpec = AdapterSpec(
        name: "hci0", address: BluetoothAddress("00:AA:01:00:00:00")!, advertisingInstances: 2, secondaryChannels: [])

    func device(_ json: String, adapter: SimulatedAdapter? = nil) throws -> SimulatedDevice {
        let spec = try DeviceSpec.parse(Data(json.utf8), adapters: ["hci0"], defaultAdapter: "hci0")
        return try SimulatedDevice(spec: spec, adapter: adapter ?? SimulatedAdapter(spec: Self.adapterSpec), seed: 1)
    }

    // MARK: Link and pairing

    @Test("Connect: the first N attempts fail after the connect delay, then the link comes up; the device is permanent")
    func connectFailuresThenUp() throws {
        let device = try device(
            #"{"address": "A4:C1:38:00:00:01", "faults": {"connect_failures": 2, "connect_delay": "50ms"}}"#)
        #expect(device.temporary)
        #expect(device.connectPlan() == .fail(after: 0.05))
        #expect(device.connectPlan() == .fail(after: 0.05))
        #expect(device.connectPlan() == .linkUp(after: 0.05))
        #expect(!device.temporary, "a public address is remembered once connected")
        device.link = .connected
        #expect(device.connectPlan() == .answer(nil), "connected already: success at once")
    }

    @Test(
        "Connect: unreachable waits out the create-connection timeout; a non-connectable device waits for an advertisement"
    )
    func connectTimeouts() throws {
        let unreachable = try device(
            #"{"address": "A4:C1:38:00:00:02", "faults": {"unreachable": true, "connect_timeout": "3s"}}"#)
        #expect(unreachable.connectPlan() == .fail(after: 3))
        #expect(!unreachable.connectAwaitsAdvertisement)
        let silent = try device(#"{"address": "A4:C1:38:00:00:03", "connectable": false}"#)
        #expect(silent.connectPlan() == .fail(after: 20))
        #expect(silent.connectAwaitsAdvertisement, "it comes up if it advertises connectably meanwhile")
    }

    @Test("Connect: a resolvable random address stays temporary, a static one does not; adapter off is NotReady")
    func connectAddressesAndPower() throws {
        let resolvable = try device(#"{"address": "4A:00:00:00:00:01", "address_type": "random"}"#)
        _ = resolvable.connectPlan()
        #expect(resolvable.temporary)
        let staticRandom = try device(#"{"address": "C4:00:00:00:00:01", "address_type": "random"}"#)
        _ = staticRandom.connectPlan()
        #expect(!staticRandom.temporary)
        let adapter = try SimulatedAdapter(spec: Self.adapterSpec)
        adapter.powered = false
        let off = try device(#"{"address": "A4:C1:38:00:00:04"}"#, adapter: adapter)
        #expect(off.connectPlan() == .answer(BlueZError.notReady))
        #expect(off.temporary, "a refused Connect changes nothing")
    }

    @Test(
        "Pair: NotReady, Page Timeout while not connected, Just Works pairs and bonds, AlreadyExists after; reject fails"
    )
    func pairing() throws {
        let adapter = try SimulatedAdapter(spec: Self.adapterSpec)
        let device = try device(#"{"address": "4A:00:00:00:00:05", "address_type": "random"}"#, adapter: adapter)
        #expect(device.pairingRefusal() == BlueZError.connectionAttemptFailed)
        device.link = .connected
        adapter.powered = false
        #expect(device.pairingRefusal() == BlueZError.notReady)
        adapter.powered = true
        #expect(device.pairingRefusal() == nil)
        #expect(device.pairingCompleted() == nil)
        #expect(device.paired && !device.temporary, "a bonded device is no longer temporary")
        #expect(device.pairingRefusal() == BlueZError.alreadyExists)

        let rejecting = try self.device(#"{"address": "A4:C1:38:00:00:06", "pairing": "reject"}"#)
        rejecting.link = .connected
        #expect(rejecting.pairingCompleted() == BlueZError.authenticationFailed)
        #expect(!rejecting.paired)
    }

    // MARK: Advertising

    @Test(
        "advertising timing: a random phase below the interval, then interval + 0–10 ms; when late, no catch-up and the phase kept"
    )
    func advertisingTiming() throws {
        let spec = #"{"address": "A4:C1:38:00:00:07", "interval": "100ms"}"#
        let device = try device(spec)
        let phase = device.firstEventDelay(wall: 0)
        #expect((0..<0.1).contains(phase))
        #expect(try self.device(spec).firstEventDelay(wall: 0) == phase, "the same seed and address: the same phase")
        let due: UInt64 = 5_000_000_000
        for _ in 0..<50 {
            let next = device.takeAdvertisingEvent(due: due, now: due, wall: 0)
            #expect((due + 100_000_000...due + 110_000_000).contains(next))
        }
        // A loop 1.05 s late: the ten events missed are skipped, and the next keeps the phase,
        // within one interval after `now` (not at `now`, where every overdue device would meet).
        let late = due + 1_050_000_000
        let next = device.takeAdvertisingEvent(due: due, now: late, wall: 0)
        #expect(next > late && next <= late + 100_000_000, "a late loop: the next event of the device's own schedule")
        #expect(
            (next - due) % 100_000_000 <= 10_000_000, "whole intervals after the one due, plus this event's advDelay")
        // Two devices of one interval and different phases, both overdue after one stall, stay apart.
        let other = try self.device(#"{"address": "A4:C1:38:00:00:09", "interval": "100ms"}"#)
        let otherNext = other.takeAdvertisingEvent(due: due + 40_000_000, now: late, wall: 0)
        #expect(otherNext != next && (otherNext > next ? otherNext - next : next - otherNext) >= 20_000_000)
    }

    @Test("aligned: the wall clock's slots of the interval, without advDelay, counters at the slot's values")
    func alignedTiming() throws {
        let device = try device(
            #"{"address": "A4:C1:38:00:00:08", "interval": "1s", "aligned": true, "manufacturer_data": {"0x0499": {"number": {"counter": {"start": 0, "step": 1}}, "format": "u8"}}}"#
        )
        #expect(abs(device.firstEventDelay(wall: 10.25) - 0.75) < 1e-9)
        let now: UInt64 = 7_000_000_000
        #expect(device.takeAdvertisingEvent(due: now, now: now, wall: 10.0) == now + 1_000_000_000)
        #expect(device.makeReport().manufacturerData.first?.bytes == [10], "slot 10: the counter's tenth value")
        _ = device.takeAdvertisingEvent(due: now, now: now, wall: 13.0)
        #expect(device.makeReport().manufacturerData.first?.bytes == [13], "two slots skipped: two values skipped")
    }

    // MARK: Reception (bluetoothd's cache)

    @Test("reception: the scan's filter decides; what a report changed is what is signalled")
    func reception() throws {
        let device = try device(
            #"{"address": "A4:C1:38:00:00:09", "name": "Battery", "service_uuids": ["180F"], "tx_power": 4, "rssi": -60}"#
        )
        var heartRate = DiscoveryFilter()
        heartRate.uuids = [BluetoothUUID(0x180D)]
        let report = device.makeReport()
        #expect(device.receive(report, filter: MergedDiscoveryFilter([heartRate])) == nil)
        #expect(device.cache.rssi == nil, "a dropped report leaves the cache alone")
        var battery = DiscoveryFilter()
        battery.uuids = [BluetoothUUID(0x180F)]
        let changed = try #require(device.receive(report, filter: MergedDiscoveryFilter([battery])))
        #expect(device.propertyChanges(changed).map(\.0) == ["RSSI", "TxPower", "Name", "Alias", "UUIDs"])
        #expect(
            device.receive(report, filter: MergedDiscoveryFilter([battery])) == [.rssi],
            "a filtered scan signals RSSI on every report, nothing else changed")
        #expect(device.propertyChanges(device.cache.discoveryStopped()).map(\.0) == ["RSSI", "TxPower"])
        #expect(device.propertyChanges([.rssi, .txPower]).allSatisfy { $0.1 == nil }, "invalidated after the scan")
    }

    @Test("reception: an unfiltered scan ignores a device without the discoverable flag")
    func undiscoverable() throws {
        let device = try device(#"{"address": "A4:C1:38:00:00:0A", "discoverable": false, "connectable": false}"#)
        #expect(device.receive(device.makeReport(), filter: MergedDiscoveryFilter([nil])) == nil)
        #expect(device.lastReportConnectable, "unchanged by a report that was dropped")
        var filter = DiscoveryFilter()
        filter.rssi = -100
        #expect(device.receive(device.makeReport(), filter: MergedDiscoveryFilter([filter])) != nil)
        #expect(!device.lastReportConnectable)
    }

    // MARK: The adapter

    @Test("StartDiscovery: off is NotReady; start_discovery_failures refuses that many with InProgress, then none")
    func discoveryStartRefusals() throws {
        var spec = Self.adapterSpec
        spec.startDiscoveryFailures = 2
        let adapter = try SimulatedAdapter(spec: spec)
        adapter.powered = false
        #expect(adapter.discoveryStartRefusal() == BlueZError.notReady)
        #expect(adapter.startDiscoveryFailuresLeft == 2, "a refusal for power does not use up the knob")
        adapter.powered = true
        #expect(adapter.discoveryStartRefusal() == BlueZError.busy)
        #expect(adapter.discoveryStartRefusal() == BlueZError.busy)
        #expect(adapter.discoveryStartRefusal() == nil)
        #expect(adapter.powerState == "on")
        adapter.blocked = true
        #expect(adapter.powerState == "off-blocked")
    }

    // MARK: The adapter's registrations

    @Test("advertisements: AlreadyExists for the same owner and path, NotPermitted past the instances, freed by owner")
    func advertisementInstances() throws {
        let adapter = try SimulatedAdapter(spec: Self.adapterSpec)
        let manager = adapter.advertising
        defer { withExtendedLifetime(adapter) {} }
        _ = try manager.reserve(owner: ":1.5", path: "/ad0")
        #expect(throws: BlueZError.alreadyExists) { try manager.reserve(owner: ":1.5", path: "/ad0") }
        _ = try manager.reserve(owner: ":1.6", path: "/ad0")
        #expect(manager.activeInstances == 2 && manager.supportedInstances == 0)
        #expect(throws: BlueZError.notPermitted("Maximum advertisements reached")) {
            try manager.reserve(owner: ":1.7", path: "/ad1")
        }
        #expect(manager.removeAll(owner: ":1.5").count == 1)
        #expect(manager.supportedInstances == 1)
        #expect(manager.onAir.isEmpty, "nothing is on air before bluetoothd read it")
    }

    @Test("advertisements: a secondary channel the controller lacks, or data past 31 bytes, fails to parse")
    func advertisementParsing() throws {
        let adapter = try SimulatedAdapter(spec: Self.adapterSpec)
        let manager = adapter.advertising
        defer { withExtendedLifetime(adapter) {} }
        #expect(try manager.parse(["Type": .string("peripheral")], log: nil).get().connectable)
        let extended: [String: DBusValue] = ["Type": .string("broadcast"), "SecondaryChannel": .string("2M")]
        #expect(throws: LEAdvertisementData.parseError) { try manager.parse(extended, log: nil).get() }
        let long: [String: DBusValue] = [
            "Type": .string("peripheral"),
            "ServiceUUIDs": .strings(["6e400001-b5a3-f393-e0a9-e50e24dcca9e", "6e400002-b5a3-f393-e0a9-e50e24dcca9e"]),
        ]
        #expect(throws: LEAdvertisementData.parseError) { try manager.parse(long, log: nil).get() }
    }

    @Test(
        "GATT applications: laid out after bluetoothd's services, one after another; the remote layout and its targets")
    func applications() throws {
        let adapter = try SimulatedAdapter(spec: Self.adapterSpec)
        let gatt = adapter.gatt
        defer { withExtendedLifetime(adapter) {} }
        let first = try gatt.reserve(owner: ":1.5", path: "/app")
        #expect(throws: BlueZError.alreadyExists) { try gatt.reserve(owner: ":1.5", path: "/app") }
        let tree = try LocalApplicationTree(managedObjects: Self.batteryApplication, root: "/app")
        #expect(gatt.accept(tree, for: first).isEmpty, "no Handle 0 to write back")
        let second = try gatt.reserve(owner: ":1.6", path: "/app")
        _ = gatt.accept(tree, for: second)
        let (layout, targets) = gatt.remoteLayout()
        #expect(layout.services.map(\.handle) == [0x01, 0x06, 0x10, 0x13, 0x17])
        let battery = try #require(layout.services.first { $0.handle == 0x13 })
        #expect(battery.characteristics.map(\.handle) == [0x14])
        #expect(battery.characteristics[0].descriptors.map(\.handle) == [0x16], "bluetoothd's CCCD after the value")
        #expect(targets[0x14] == ApplicationObject(owner: ":1.5", path: "/app/s0/c0", flags: ["read", "notify"]))
        #expect(targets[0x18]?.owner == ":1.6")
    }

    @Test("GATT applications: the CCCD's subscribers; StopNotify only when the last one goes, or the application")
    func subscribers() throws {
        let adapter = try SimulatedAdapter(spec: Self.adapterSpec)
        let gatt = adapter.gatt
        defer { withExtendedLifetime(adapter) {} }
        let application = try gatt.reserve(owner: ":1.5", path: "/app")
        let target = ApplicationObject(owner: ":1.5", path: "/app/s0/c0", flags: ["notify"])
        #expect(gatt.subscribe("/org/bluez/hci1/dev_1", to: target))
        #expect(!gatt.subscribe("/org/bluez/hci1/dev_1", to: target), "the same central again: no second StartNotify")
        #expect(gatt.subscribe("/org/bluez/hci1/dev_2", to: target))
        #expect(!gatt.unsubscribe("/org/bluez/hci1/dev_1", from: target))
        #expect(gatt.unsubscribe("/org/bluez/hci1/dev_2", from: target), "the last one: StopNotify")
        #expect(!gatt.unsubscribe("/org/bluez/hci1/dev_2", from: target))
        #expect(gatt.subscribe("/org/bluez/hci1/dev_1", to: target))
        gatt.remove(application)
        #expect(gatt.subscribers.isEmpty, "an application that goes takes its subscriptions")
    }

    /// `GetManagedObjects` of an application with one service (180F) and one characteristic (2A19, read + notify).
    static let batteryApplication: DBusValue = {
        func object(_ path: DBusObjectPath, _ interface: String, _ properties: [(String, DBusValue)])
            -> DBusDictionaryEntry
        {
            DBusDictionaryEntry(
                .objectPath(path),
                .dictionary(
                    key: .string, value: .dictionary(key: .string, value: .variant),
                    [DBusDictionaryEntry(.string(interface), .variantDictionary(properties))]))
        }
        return .dictionary(
            key: .objectPath, value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)),
            [
                object("/app/s0", LocalApplicationTree.serviceInterface, [("UUID", "180F"), ("Primary", true)]),
                object(
                    "/app/s0/c0", LocalApplicationTree.characteristicInterface,
                    [("UUID", "2A19"), ("Service", .objectPath("/app/s0")), ("Flags", .strings(["read", "notify"]))]),
            ])
    }()
}
