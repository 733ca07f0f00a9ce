import Bluetooth
import DBus
import EventLoop
import Glibc
import JSON

extension BlueZSimulator {
    // MARK: Adapter1 methods

    func startDiscovery(_ name: String, _ call: DBusMessage) throws {
        guard let adapter = adapter(named: name), let client = call.sender else { throw BlueZError.invalidArguments }
        guard adapter.powered else { throw BlueZError.notReady }
        counters.startDiscoveryCalls += 1
        if adapter.startDiscoveryFailuresLeft > 0 {
            adapter.startDiscoveryFailuresLeft -= 1
            throw BlueZError.busy
        }
        if try adapter.sessions.start(client) {
            // The reply goes out during dispatch; Discovering=true follows at the end of the turn.
            change([("Discovering", .boolean(true))], interface: Self.adapterInterfaceName, at: adapter.path)
            startAdvertising(adapter)
        }
    }

    func stopDiscovery(_ name: String, _ call: DBusMessage) throws {
        guard let adapter = adapter(named: name), let client = call.sender else { throw BlueZError.invalidArguments }
        guard adapter.powered else { throw BlueZError.notReady }
        if try adapter.sessions.stop(client) { discoveryStopped(adapter) }
    }

    func setDiscoveryFilter(_ name: String, _ call: DBusMessage) throws {
        guard let adapter = adapter(named: name), let client = call.sender else { throw BlueZError.invalidArguments }
        guard adapter.powered else { throw BlueZError.notReady }
        let filter = try DiscoveryFilter.parse(call.arguments[0].entries ?? [])
        adapter.sessions.setFilter(filter, for: client)
    }

    /// The last session ended (stop, client left, power-off): Discovering=false, RSSI and TxPower
    /// invalidated on every device, temporary devices last seen non-connectable removed at once,
    /// the adapter's devices off the advertising schedule (a scan started again before their next
    /// event would otherwise schedule each a second time: twice the reports, for good).
    func discoveryStopped(_ adapter: SimulatedAdapter) {
        schedule.removeAll { devices[$0]?.adapter === adapter }
        defer {  // after the devices' RSSI/TxPower invalidation, as bluetoothd 5.66 orders them
            change([("Discovering", .boolean(false))], interface: Self.adapterInterfaceName, at: adapter.path)
        }
        for path in deviceOrder {
            guard let device = devices[path], device.adapter === adapter, device.exported else { continue }
            let invalidated = device.cache.discoveryStopped()
            var changes: [(String, DBusValue?)] = []
            if invalidated.contains(.rssi) { changes.append(("RSSI", nil)) }
            if invalidated.contains(.txPower) { changes.append(("TxPower", nil)) }
            change(changes, interface: Self.deviceInterface, at: device.path)
            if device.temporary && !device.lastReportConnectable && !device.isConnected {
                unexportDevice(device)
            }
        }
    }

    func removeDevice(_ name: String, _ call: DBusMessage, _ reply: DBusPendingReply) {
        guard let adapter = adapter(named: name) else { return reply.fail(BlueZError.invalidArguments) }
        guard adapter.powered else { return reply.fail(BlueZError.notReady) }
        guard let path = call.arguments[0].objectPath, let device = devices[path], device.adapter === adapter,
            device.exported
        else {
            return reply.fail(BlueZError.doesNotExist)
        }
        switch device.link {
        case .disconnected:
            unexportDevice(device)
            reply.succeed()
        case .connecting(let pending, let timer):
            cancel(timer)
            device.link = .disconnected
            pending.fail(BlueZError.failed("br-connection-canceled"))
            unexportDevice(device)
            reply.succeed()
        case .connected, .disconnecting:
            disconnect(path, nil) { simulator in
                if let device = simulator.devices[path] { simulator.unexportDevice(device) }
                reply.succeed()
            }
        }
    }

    /// Removes Device1 and its GATT objects (InterfacesRemoved); the device may be found again.
    func unexportDevice(_ device: SimulatedDevice) {
        guard device.exported else { return }
        cancel(device.temporaryTimer)
        device.temporaryTimer = nil
        forgetSignals(under: device.path)
        withBus { connection in
            for path in connection.exportedPaths.reversed()
            where path != device.path && path.isDescendant(of: device.path) {
                try connection.unexport(at: path)
            }
            try connection.unexport(at: device.path)
        }
        device.exported = false
        device.gattExported = false
        // Forgotten: its pairing (keys, bond) goes too.
        endPairing(device, BlueZError.authenticationCanceled)
        device.paired = false
        device.cache = AdvertisementCache()
        device.alias = nil
        device.temporary = true
        device.resolvedOnce = false
        device.servicesResolved = false
        for characteristic in device.characteristics {
            characteristic.notifySessions.removeAll()
            stopNotifyTimer(characteristic)
        }
    }

    // MARK: Advertising

    /// Puts every advertising device of `adapter` on the schedule (``scheduleFirstEvent(_:now:)``).
    func startAdvertising(_ adapter: SimulatedAdapter) {
        let (now, wall) = Self.clocks()
        for path in deviceOrder {
            guard let device = devices[path], device.adapter === adapter, device.spec.interval > 0 else { continue }
            scheduleFirstEvent(device, now: now, wall: wall)
        }
        armSchedule()
    }

    /// Puts a device that a scan starts to hear at `now` (the scan began, or it came into range
    /// during one; `wall` is the same moment on the wall clock, ``clocks()``) on the schedule: an
    /// aligned device at the wall clock's next slot of its interval, any other at a random phase
    /// of it (as a radio's advertisers are not synchronised with the scan nor with each other).
    /// The caller arms the schedule.
    func scheduleFirstEvent(_ device: SimulatedDevice, now: UInt64, wall: Double) {
        let delay =
            device.spec.aligned ? Self.slot(device.spec.interval, wall: wall).untilNext : device.randomPhase()
        schedule.insert(device.path, at: later(now, by: delay))
    }

    func armSchedule() {
        guard let earliest = schedule.earliest else { return }
        if let scheduleTimer { loop.cancelTimer(scheduleTimer) }
        let now = EventLoop.now()
        let delay = earliest > now ? Double(earliest - now) / 1e9 : 0
        scheduleTimer = after(delay) { $0.advertisingTick() }
    }

    func advertisingTick() {
        scheduleTimer = nil
        let (now, wall) = Self.clocks()
        var handled = 0
        while handled < 10_000, let (deadline, path) = schedule.popDue(now: now) {
            handled += 1
            guard let device = devices[path], device.adapter.sessions.isDiscovering, device.adapter.powered,
                device.spec.interval > 0
            else { continue }
            if device.spec.aligned {
                // On the wall clock's slots: this one's number sets the counters.
                let (slot, untilNext) = Self.slot(device.spec.interval, wall: wall)
                device.advance(to: slot)
                advertisingEvent(device, due: deadline, now: now)
                schedule.insert(path, at: later(now, by: untilNext))
                continue
            }
            advertisingEvent(device, due: deadline, now: now)
            // advInterval + advDelay after this event was due (from now if the loop fell behind).
            let next = max(later(deadline, by: device.spec.interval + device.advertisingDelay()), now)
            schedule.insert(path, at: next)
        }
        armSchedule()
    }

    /// One advertising event of `device`, due at `due`, handled at `now`: a report, unless the
    /// device is silent while connected; its times go to the recording, if one runs.
    private func advertisingEvent(_ device: SimulatedDevice, due: UInt64, now: UInt64) {
        guard device.spec.advertisesWhileConnected || !device.isConnected else { return }
        report(device)
        reportTimes?.append(ReportTime(address: device.spec.address, due: due, sent: now))
    }

    /// The wall clock's slot of `interval` nearest to `wall` (slot k is at k × interval seconds
    /// since the epoch; a timer fires a little early or late) and the seconds until the next one.
    static func slot(_ interval: Double, wall: Double) -> (slot: Int64, untilNext: Double) {
        let slot = (wall / interval).rounded()
        return (Int64(slot), max(0, (slot + 1) * interval - wall))
    }

    /// Now on the monotonic clock (`EventLoop.now()`, ns) and on the wall clock (seconds since
    /// the epoch), read together: an aligned device's next slot, reckoned on the wall clock,
    /// becomes a deadline after the monotonic `now` without the time spent since (the reports
    /// of a loop turn), so aligned devices of one interval stay exactly together.
    static func clocks() -> (now: UInt64, wall: Double) {
        let now = EventLoop.now()
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return (now, Double(time.tv_sec) + Double(time.tv_nsec) / 1e9)
    }

    /// One advertising report through bluetoothd's pipeline (`btd_adapter_update_found_device`).
    func report(_ device: SimulatedDevice) {
        let report = device.makeReport()
        counters.advertisementReports += 1
        let merged = device.adapter.sessions.merged
        guard
            merged.admits(
                address: device.spec.address, name: report.name, serviceUUIDs: report.serviceUUIDs, rssi: report.rssi,
                discoverable: device.spec.discoverable)
        else { return }
        device.lastReportConnectable = device.spec.connectable
        let changed = device.cache.apply(
            report, filteredDiscovery: merged.isFiltered, duplicateData: merged.duplicateData,
            servicesResolved: device.resolvedOnce)
        if !device.exported {
            exportDevice(device)
        } else {
            var changes: [(String, DBusValue?)] = []
            if changed.contains(.rssi) { changes.append(("RSSI", device.cache.rssi.map { .int16($0) })) }
            if changed.contains(.txPower) { changes.append(("TxPower", device.cache.txPower.map { .int16($0) })) }
            if changed.contains(.name) { changes.append(("Name", device.cache.name.map { .string($0) })) }
            if changed.contains(.alias) && device.alias == nil { changes.append(("Alias", .string(device.aliasValue))) }
            if changed.contains(.uuids) { changes.append(("UUIDs", .strings(device.uuidsValue))) }
            if changed.contains(.manufacturerData) {
                changes.append(("ManufacturerData", Self.manufacturerValue(device.cache)))
            }
            if changed.contains(.serviceData) { changes.append(("ServiceData", Self.serviceDataValue(device.cache))) }
            change(changes, interface: Self.deviceInterface, at: device.path)
        }
        if device.temporary { armTemporaryTimer(device) }
    }

    func exportDevice(_ device: SimulatedDevice) {
        guard !device.exported else { return }
        device.exported = true
        let interface = deviceInterface(device)
        withBus { try $0.export([interface], at: device.path) }
    }

    /// Restarts the 30 s (TemporaryTimeout) countdown to removal.
    func armTemporaryTimer(_ device: SimulatedDevice) {
        cancel(device.temporaryTimer)
        let path = device.path
        device.temporaryTimer = after(timing.temporaryTimeout) { simulator in
            guard let device = simulator.devices[path] else { return }
            device.temporaryTimer = nil
            guard device.temporary, case .disconnected = device.link else { return }
            simulator.unexportDevice(device)
        }
    }

    // MARK: Power

    /// Powers an adapter on or off. Off: discovery sessions dropped (Discovering=false), links
    /// dropped, pending connects fail, temporary non-connectable devices removed, Powered=false.
    func setPowered(_ name: String, _ on: Bool, fromClient: Bool = false) {
        guard let adapter = adapter(named: name), adapter.powered != on, !(on && adapter.blocked) else { return }
        adapter.powered = on
        log?("simulator: \(name) powered \(on ? "on" : "off")")
        if !on {
            if adapter.sessions.dropAll() { discoveryStopped(adapter) }
            for path in deviceOrder {
                guard let device = devices[path], device.adapter === adapter else { continue }
                switch device.link {
                case .disconnected: break
                case .connecting(let reply, let timer):
                    cancel(timer)
                    device.link = .disconnected
                    reply.fail(BlueZError.failed("le-connection-abort-by-local"))
                case .connected, .disconnecting:
                    linkDown(device)
                }
            }
        }
        if !fromClient {
            change([("Powered", .boolean(on))], interface: Self.adapterInterfaceName, at: adapter.path)
        }
        powerStateChanged(adapter)
        // A powered-off controller stops advertising: bluetoothd releases the advertisements.
        if !on { releaseAdvertisements(adapter) }
        peripheralChanged(adapter)
    }
}

/// `seconds` after `instant` on the monotonic nanosecond clock. A scenario's interval may be any
/// duration; one past the clock's range gives its end (that device never advertises again).
private func later(_ instant: UInt64, by seconds: Double) -> UInt64 {
    let (sum, overflow) = instant.addingReportingOverflow(UInt64(saturating: seconds * 1e9))
    return overflow ? .max : sum
}
