import Bluetooth
import BluetoothManagement
import DBus
import EventLoop

/// One consumer of ``CentralManager/scan(_:bufferingNewest:)`` or
/// ``CentralManager/scan(_:handler:)``. Actor-confined.
struct ScanSubscription {
    /// Where results go: a stream, or a handler called on the loop thread.
    enum Sink {
        case stream(Stream)
        case handler(@Sendable (ScanResult) -> Void)
    }

    /// A stream's continuation, behind a reference. `AsyncStream.Continuation` comes from a
    /// library built for evolution, so its size is only known at run time: held inline it made
    /// every copy of a subscription, and every step through ``CentralManager/scans`` for each
    /// advertisement report, go through runtime value witnesses and type metadata.
    final class Stream: Sendable {
        let continuation: AsyncStream<ScanResult>.Continuation
        init(_ continuation: AsyncStream<ScanResult>.Continuation) { self.continuation = continuation }
    }

    var options: ScanOptions
    let sink: Sink
    /// Hash of the last reported advertisement content per device (without RSSI), for
    /// `allowDuplicates == false`; entries go when BlueZ removes the device. Keyed like the
    /// tree's devices (no path string per device).
    var lastContent: [DeviceTable.Key: Int] = [:]
    /// The same for kernel reports, by address (they need not have a device object); bounded
    /// (``CentralManager/kernelNamesLimit``).
    var kernelContent: [BluetoothAddress: Int] = [:]
}

/// This manager's discovery session in BlueZ. Actor-confined.
struct DiscoveryState {
    /// StartDiscovery succeeded and the session was not dropped since (power-off, restart).
    var sessionActive = false
    /// The filter last accepted by SetDiscoveryFilter.
    var filterSent: DBusValue?
    /// An update (filter/start/stop) is running; `dirty` asks for another one after it.
    var busy = false
    var dirty = false
    var retryTimer: EventLoop.Token?
    /// Current backoff after InProgress/NotReady (0: none yet).
    var retryDelay: Double = 0
    /// How the radio scans for this manager now (nil: no scan): ``CentralManager/scanMode``.
    var mode: ScanMode?
    /// Told when ``mode`` changes, on the loop thread.
    var modeHandlers: [Int: @Sendable (ScanMode?) -> Void] = [:]
}

extension CentralManager {
    /// Scans continuously (one `StartDiscovery` for all scans of this manager; never stop/start
    /// cycles) and reports discoveries as an `AsyncStream`.
    ///
    /// Several scans may run at once (also from other processes); BlueZ's filter is the merge of
    /// this manager's scans and every stream re-checks its own ``ScanOptions``. A new scan first
    /// reports the matching devices BlueZ already sees (those with an `RSSI`), as BlueZ may never
    /// signal them again while another client's discovery keeps the merged scan unfiltered; the
    /// same happens whenever this manager's discovery session is (re)started. Discovery is
    /// re-armed by itself after an adapter power cycle or a bluetoothd restart, and `InProgress`
    /// / `NotReady` from BlueZ are retried with backoff. The session ends when the last stream
    /// ends (the consumer stops iterating or cancels), with `StopDiscovery` and a cleared filter.
    ///
    /// Buffering: the newest `bufferingNewest` results are kept; a consumer that falls behind
    /// loses the oldest. Results are yielded on the loop thread as BlueZ signals arrive.
    /// - Throws: ``CentralError`` when the state is not `.poweredOn`.
    public func scan(_ options: ScanOptions = ScanOptions(), bufferingNewest limit: Int = 4096) throws -> AsyncStream<
        ScanResult
    > {
        try requirePoweredOn("scan")
        let (stream, continuation) = AsyncStream.makeStream(
            of: ScanResult.self, bufferingPolicy: .bufferingNewest(limit))
        let id = makeID()
        scans[id] = ScanSubscription(options: options, sink: .stream(ScanSubscription.Stream(continuation)))
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.loop.execute {
                self.assumeIsolated { central in
                    guard central.scans.removeValue(forKey: id) != nil else { return }
                    central.armDiscovery()
                }
            }
        }
        armDiscovery()
        // Devices BlueZ already knows and currently sees are reported at once: in an unfiltered
        // discovery (another client's, merged with ours) BlueZ signals a known device again only
        // when its RSSI moves by 8 dBm or its data changes, so waiting for signals could miss it
        // for good. Signals still queued are handled after this and reported as usual.
        reportKnownDevices(to: [id])
        return stream
    }

    /// Scans like ``scan(_:bufferingNewest:)``, but hands every result to `handler` on the loop
    /// thread, inside the handling of the BlueZ signal that carried it: no stream, no buffer, no
    /// task between bluetoothd and the handler, which must not block. Devices BlueZ already sees
    /// are reported before this returns. Lasts until ``stopScan(_:)`` or ``close()``.
    ///
    /// With `waitingForAdapter` a scan asked for while the state is not `.poweredOn` (adapter
    /// off, blocked or missing, bluetoothd gone, access denied) is kept and starts by itself
    /// once it is, like a scan that outlived a power cycle.
    /// - Throws: ``CentralError`` when the state is not `.poweredOn` (without `waitingForAdapter`)
    ///   or the manager is closed.
    public func scan(
        _ options: ScanOptions = ScanOptions(), waitingForAdapter: Bool = false,
        handler: @escaping @Sendable (ScanResult) -> Void
    ) throws -> ScanToken {
        if waitingForAdapter {
            if closed { throw closedError("scan") }
        } else {
            try requirePoweredOn("scan")
        }
        let id = makeID()
        scans[id] = ScanSubscription(options: options, sink: .handler(handler))
        armDiscovery()
        reportKnownDevices(to: [id])
        return ScanToken(id: id)
    }

    /// Ends a scan started with ``scan(_:handler:)``: its handler is not called again; the
    /// discovery session ends when it was the last scan.
    public func stopScan(_ token: ScanToken) {
        guard scans.removeValue(forKey: token.id) != nil else { return }
        armDiscovery()
    }

    /// Whether this manager holds a discovery session in BlueZ now.
    public var isScanning: Bool { discovery.sessionActive }

    /// Changes one scan's ``ScanOptions/mode``; the radio follows (``scanMode``).
    public func setScanMode(_ mode: ScanMode, for token: ScanToken) {
        guard let scan = scans[token.id], scan.options.mode != mode else { return }
        scans[token.id]?.options.mode = mode
        armDiscovery()
    }

    /// How the radio scans for this manager's scans now: `.active` while its discovery session
    /// runs, `.passive` while the kernel holds its advertisement monitor instead; nil when it
    /// does neither (no scan, adapter off, or on the way).
    public var scanMode: ScanMode? { discovery.mode }

    /// The mode the scans ask for: none without scans; active when any scan is active, or when
    /// passive is not possible (the D-Bus path: reports from bluetoothd, or no management socket).
    var wantedScanMode: ScanMode? {
        if scans.isEmpty { return learning.isEmpty ? nil : .active }
        if !learning.isEmpty || scans.values.contains(where: { $0.options.mode == .active }) { return .active }
        return reports == .kernel && passiveScanner != nil ? .passive : .active
    }

    /// Calls `handler` on the loop thread whenever ``scanMode`` changes, until
    /// ``stopScanModeUpdates(_:)``.
    public func scanModeUpdates(handler: @escaping @Sendable (ScanMode?) -> Void) -> Int {
        let id = makeID()
        discovery.modeHandlers[id] = handler
        return id
    }

    public func stopScanModeUpdates(_ id: Int) {
        discovery.modeHandlers.removeValue(forKey: id)
    }

    /// Removes the advertisement monitor this manager holds, if any.
    func releasePassiveScan() async {
        guard let controller = passiveScannerHeld, let passiveScanner else { return }
        passiveScannerHeld = nil
        await passiveScanner.releasePassiveScan(controller: controller)
    }

    func setEffectiveScanMode(_ mode: ScanMode?) {
        guard discovery.mode != mode else { return }
        discovery.mode = mode
        for handler in discovery.modeHandlers.values { handler(mode) }
    }

    /// Brings BlueZ's discovery in line with the scans: filter, start, or stop.
    func armDiscovery() {
        if discovery.busy {
            discovery.dirty = true
            return
        }
        discovery.busy = true
        Task { await self.updateDiscovery() }
    }

    private func updateDiscovery() async {
        defer {
            discovery.busy = false
            if discovery.dirty {
                discovery.dirty = false
                armDiscovery()
            }
        }
        guard state == .poweredOn, let adapterPath, !closed else {
            setEffectiveScanMode(nil)
            return
        }
        let adapter = BlueZObjectTree.adapter
        let wanted = wantedScanMode
        if wanted == .passive, let passiveScanner, let adapterIndex {
            do {
                if let held = passiveScannerHeld, held != adapterIndex {
                    passiveScannerHeld = nil
                    await passiveScanner.releasePassiveScan(controller: held)
                }
                try await passiveScanner.holdPassiveScan(controller: adapterIndex)
                passiveScannerHeld = adapterIndex
            } catch {
                scheduleDiscoveryRetry()
                return
            }
            if discovery.sessionActive {
                _ = try? await callBlueZ(adapterPath, adapter, "StopDiscovery", timeout: .seconds(10))
                discovery.sessionActive = false
            }
            discovery.retryDelay = 0
            setEffectiveScanMode(.passive)
            return
        }
        if scans.isEmpty, learning.isEmpty {
            setEffectiveScanMode(nil)
            await releasePassiveScan()
            guard discovery.sessionActive || discovery.filterSent != nil else { return }
            if discovery.sessionActive {
                // NotReady/InProgress/Failed after the session is already gone are harmless (bleak#2021).
                _ = try? await callBlueZ(adapterPath, adapter, "StopDiscovery", timeout: .seconds(10))
                discovery.sessionActive = false
            }
            _ = try? await callBlueZ(
                adapterPath, adapter, "SetDiscoveryFilter", [.variantDictionary([String: DBusValue]())],
                timeout: .seconds(10))
            discovery.filterSent = nil
            return
        }
        let filter = mergedFilter()
        do {
            if discovery.filterSent != filter {
                _ = try await callBlueZ(adapterPath, adapter, "SetDiscoveryFilter", [filter], timeout: .seconds(10))
                discovery.filterSent = filter
            }
            if !discovery.sessionActive {
                _ = try await callBlueZ(adapterPath, adapter, "StartDiscovery", timeout: .seconds(10))
                discovery.sessionActive = true
                // (Re)armed, e.g. after a power cycle or a bluetoothd restart whose objects came
                // from GetManagedObjects: what is already being seen will not be signalled again.
                reportKnownDevices(to: Array(scans.keys))
            }
            discovery.retryDelay = 0
            setEffectiveScanMode(.active)
            // After the discovery started, so that the radio never stops listening.
            await releasePassiveScan()
        } catch {
            let failure = CentralError.wrap(error, operation: "org.bluez.Adapter1.StartDiscovery")
            if failure.code == .bluezUnavailable && bluezOwner == nil { return }  // a restart re-arms
            scheduleDiscoveryRetry()
        }
    }

    /// Retries discovery after a growing delay (never a tight loop).
    private func scheduleDiscoveryRetry() {
        guard discovery.retryTimer == nil else { return }
        let delay =
            discovery.retryDelay == 0
            ? options.discoveryRetryDelay : min(discovery.retryDelay * 2, options.discoveryRetryMaximum)
        discovery.retryDelay = delay
        discovery.retryTimer = loop.addTimer(after: delay) { [weak self] in
            self?.assumeIsolated { central in
                central.discovery.retryTimer = nil
                central.armDiscovery()
            }
        }
    }

    /// Number of discovery retries pending or made since the last success (for tests and health).
    public var discoveryRetryDelay: Double { discovery.retryDelay }

    /// The merge of this manager's scans: UUIDs only if every scan filters by UUID, the lowest
    /// RSSI threshold only if every scan has one, DuplicateData if any scan wants duplicates.
    func mergedFilter() -> DBusValue {
        var pairs: [(String, DBusValue)] = [("Transport", .string("le"))]
        let all = scans.values.map(\.options)
        if reports == .bluez, all.allSatisfy({ $0.services != nil }) {
            var uuids: [String] = []
            for option in all {
                for uuid in option.services ?? [] where !uuids.contains(uuid.description) {
                    uuids.append(uuid.description)
                }
            }
            pairs.append(("UUIDs", .strings(uuids.sorted())))
        }
        if all.allSatisfy({ $0.rssiThreshold != nil }), let lowest = all.compactMap(\.rssiThreshold).min() {
            pairs.append(("RSSI", .int16(max(-127, min(20, lowest)))))
        }
        pairs.append(("DuplicateData", .boolean(all.contains { $0.allowDuplicates })))
        return .variantDictionary(pairs)
    }

    func deviceAppeared(_ path: DBusObjectPath) {
        if let device = tree.device(path), device.isConnected, let peripheral = device.peripheral {
            linkCameUp(peripheral)
        }
        deviceAdvertised(path)
    }

    func deviceRemoved(_ path: DBusObjectPath) {
        if scans.values.contains(where: { !$0.lastContent.isEmpty }) {
            let key = tree.devices.key(path)
            for id in scans.keys { scans[id]?.lastContent.removeValue(forKey: key) }
        }
        cancelServicesResolved(path)
        if let device = tree.device(path), device.isConnected, let peripheral = device.peripheral {
            linkWentDown(peripheral, reason: nil)
        }
    }

    /// Forgets the reported content of devices BlueZ no longer has (they went while bluetoothd
    /// was away, so no `InterfacesRemoved` said so).
    func forgetVanishedDevices() {
        for (id, scan) in scans {
            let kept = scan.lastContent.filter { tree.devices.contains($0.key) }
            scans[id]?.lastContent = kept
        }
    }

    /// Reports to the scans `ids` every device of our adapter that BlueZ currently sees: one with
    /// an `RSSI` (BlueZ invalidates it when discovery stops, so a device merely remembered from
    /// an earlier discovery is left out). Each scan re-checks its own options as for a signal.
    func reportKnownDevices(to ids: [Int]) {
        guard reports == .bluez, !ids.isEmpty, let adapterPath else { return }
        for path in tree.paths(with: BlueZObjectTree.device, below: adapterPath) where isOurDevice(path) {
            guard tree.device(path)?.hasRSSI == true else { continue }
            deviceAdvertised(path, only: ids)
        }
    }

    /// A device was added or its advertisement properties changed: report it to each scan
    /// (or each of `only`) whose options it passes.
    func deviceAdvertised(_ path: DBusObjectPath, only ids: [Int]? = nil) {
        deviceAdvertised(path, key: tree.devices.key(path), only: ids)
    }

    /// As ``deviceAdvertised(_:only:)``, with the device's key (``DeviceTable/key(_:)`` of `path`).
    func deviceAdvertised(_ path: DBusObjectPath, key: DeviceTable.Key, only ids: [Int]? = nil) {
        if reports == .kernel, let address = tree.device(key)?.address, kernelNames[address]?.isEmpty == true {
            kernelNames[address] = nil  // BlueZ's device changed: its name is asked for again
        }
        guard reports == .bluez, !scans.isEmpty, let device = tree.device(key),
            let peripheral = device.peripheral
        else { return }
        report(ScanResult(peripheral: peripheral, advertisementData: device.advertisementData), only: ids) {
            id, hash in
            guard scans[id]?.lastContent[key] != hash else { return false }
            scans[id]?.lastContent[key] = hash
            return true
        }
    }

    /// Hands `result` to each scan (or each of `only`) whose options it passes. `isNew` says,
    /// for a scan that drops duplicates, whether a content hash (without RSSI) differs from the
    /// device's last one reported to that scan, and records it.
    private func report(
        _ result: ScanResult, only ids: [Int]? = nil, isNew: (_ scan: Int, _ contentHash: Int) -> Bool
    ) {
        let data = result.advertisementData
        // The content (without RSSI) is hashed only for a scan that drops duplicates: the
        // gateway's scan keeps them, and this runs for every advertisement report.
        var contentHash: Int?
        for (id, scan) in scans where ids?.contains(id) ?? true {
            if let services = scan.options.services,
                !services.contains(where: { data.serviceUUIDs.contains($0) || data.serviceData[$0] != nil })
            {
                continue
            }
            if let threshold = scan.options.rssiThreshold, let rssi = data.rssi, rssi < threshold { continue }
            if !scan.options.allowDuplicates {
                if contentHash == nil {
                    var content = data
                    content.rssi = nil
                    contentHash = content.hashValue
                }
                guard let contentHash, isNew(id, contentHash) else { continue }
            }
            switch scan.sink {
            case .stream(let stream): stream.continuation.yield(result)
            case .handler(let handler): handler(result)
            }
        }
    }

    /// At most this many addresses in ``kernelNames`` and a scan's kernel content hashes (a street full of
    /// phones with rotating addresses must not grow them without bound): when full, emptied.
    static let kernelNamesLimit = 4096

    /// One report from the kernel's management socket (``KernelRadio``), on the loop thread, with
    /// ``CentralOptions/reports`` `.kernel`: its AD bytes decoded and handed to every scan whose
    /// options it passes, exactly like a report of BlueZ's D-Bus view, with the report itself in
    /// ``ScanResult/kernelReport``. Reports of other controllers are ignored. A report without a
    /// name takes the one this address last sent, else BlueZ's `Name` of the device.
    public func kernelReport(_ found: DeviceFound) {
        guard reports == .kernel, !scans.isEmpty, state == .poweredOn, found.controller == adapterIndex
        else { return }
        var data = AdvertisementData(advertisingData: found.data)
        // 127: the controller had no RSSI for this report.
        data.rssi = found.rssi == 127 ? nil : Int16(found.rssi)
        if let name = data.localName {
            if kernelNames[found.address] != name { rememberKernelName(name, for: found.address) }
        } else if let name = kernelNames[found.address] {
            if !name.isEmpty { data.localName = name }
        } else {
            // Asked of BlueZ once per address, not at every report of a nameless device: the
            // answer is kept, an empty one too, until BlueZ's device changes (``deviceAdvertised``).
            let name = devicePath(found.address).flatMap { tree.device($0)?.peripheral?.name } ?? ""
            rememberKernelName(name, for: found.address)
            if !name.isEmpty { data.localName = name }
        }
        let addressType: BluetoothAddress.AddressType? =
            switch found.addressType {
            case .lePublic: .public
            case .leRandom: .random
            default: nil
            }
        let peripheral = Peripheral(address: found.address, addressType: addressType, name: data.localName)
        report(ScanResult(peripheral: peripheral, advertisementData: data, kernelReport: found)) { id, hash in
            guard let seen = scans[id]?.kernelContent, seen[found.address] != hash else { return false }
            if seen.count >= Self.kernelNamesLimit { scans[id]?.kernelContent.removeAll(keepingCapacity: true) }
            scans[id]?.kernelContent[found.address] = hash
            return true
        }
    }

    /// Keeps `name` (empty: none known) for the kernel's reports of `address` without one.
    private func rememberKernelName(_ name: String, for address: BluetoothAddress) {
        if kernelNames.count >= Self.kernelNamesLimit { kernelNames.removeAll(keepingCapacity: true) }
        kernelNames[address] = name
    }

    /// Switches where scans get their reports (``CentralOptions/reports``), e.g. to `.kernel`
    /// once a ``KernelRadio`` is open, back to `.bluez` when its socket closed; discovery's
    /// filter follows (no UUIDs on the kernel path).
    /// `radio` (on `.kernel`) also serves passive scans (``ScanOptions/mode``): its
    /// advertisement monitor replaces the discovery while every scan is passive.
    public func setReportSource(_ source: CentralOptions.ReportSource, radio: KernelRadio? = nil) {
        let scanner = source == .kernel ? radio : nil
        guard reports != source || passiveScanner !== scanner else { return }
        reports = source
        if let old = passiveScanner, old !== scanner, let held = passiveScannerHeld {
            passiveScannerHeld = nil
            Task { await old.releasePassiveScan(controller: held) }
        }
        passiveScanner = scanner
        armDiscovery()
        // The bus's rules follow (BlueZMatchRules.swift); back on D-Bus every device is read
        // again once they are in, and what is seen now reported to the scans.
        scheduleMatchRuleUpdate()
    }

    /// Reads the advertisements of the D-Bus path in batches: the central's bus connection
    /// coalesces its input for `seconds` (``DBusConnection/setInputCoalescing(_:)``; a call's
    /// reply is never held). `bluetooth.report_batch`; the management path's socket is
    /// ``KernelRadio/setCoalescing(_:)``.
    public func setReportBatch(_ seconds: Double) {
        connection.assumeLoopIsolated { $0.setInputCoalescing(seconds) }
    }

    /// `N` of an adapter path `/org/bluez/hciN`.
    static func controllerIndex(of path: DBusObjectPath) -> UInt16? {
        let name = path.rawValue.split(separator: "/").last ?? ""
        guard name.hasPrefix("hci") else { return nil }
        return UInt16(name.dropFirst(3))
    }

    /// What BlueZ remembers of a peripheral's advertisements (`Device1`'s name, service UUIDs —
    /// with the GATT services once resolved —, manufacturer and service data; an RSSI only while
    /// a discovery sees it); empty when BlueZ does not know the device. For a connected
    /// peripheral, which usually no longer advertises, this is all there is.
    public func rememberedAdvertisementData(_ address: BluetoothAddress) -> AdvertisementData {
        guard let path = devicePath(address), let device = tree.device(path) else { return AdvertisementData() }
        return device.advertisementData
    }
}
