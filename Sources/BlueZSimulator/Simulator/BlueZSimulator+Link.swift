import Bluetooth
import DBus
import EventLoop

/// Linked adapters (`links[]`, like `btvirt -l2`): an adapter's registered advertisements are
/// reported to the adapters linked with it as a remote device (address = the advertising
/// adapter's), whose GATT database is the advertising adapter's registered applications. A
/// connection from the central side makes the central's address appear connected on the
/// peripheral side, and GATT operations become calls into the applications.
extension BlueZSimulator {
    /// The advertisements or applications of `adapter` changed: update what linked adapters see.
    func peripheralChanged(_ adapter: SimulatedAdapter) {
        for link in scenario.links {
            guard let otherName = link.peer(of: adapter.spec.name), let central = self.adapter(named: otherName) else {
                continue
            }
            updateMirror(of: adapter, on: central, link: link)
        }
    }

    private func updateMirror(of peripheral: SimulatedAdapter, on central: SimulatedAdapter, link: LinkSpec) {
        guard let path = try? central.path.appending(peripheral.spec.address.bluezPathComponent) else { return }
        let advertisements = peripheral.advertising.onAir
        let device: SimulatedDevice
        if let existing = devices[path] {
            guard existing.mirror != nil else { return }  // a scenario device with the same address wins
            device = existing
        } else {
            guard !advertisements.isEmpty else { return }
            let spec = DeviceSpec(
                address: peripheral.spec.address, addressType: .public, adapter: central.spec.name, name: nil,
                rssi: link.rssi,
                rssiJitter: 0, interval: 0, connectable: false, discoverable: false, txPower: nil, appearance: nil,
                serviceUUIDs: [], manufacturerData: [], serviceData: [], services: [], faults: FaultSpec())
            guard
                let created = try? SimulatedDevice(
                    spec: spec, adapter: central, seed: scenario.seed, layout: GATTLayout([], name: nil))
            else {
                return
            }
            created.mirror = MirrorState(peripheralAdapter: peripheral.spec.name)
            devices[path] = created
            deviceOrder.append(path)
            device = created
        }
        // Advertising.
        let alias = peripheral.spec.alias
        device.mirror?.reports = advertisements.map { data in
            AdvertisementReport(
                rssi: 0, txPower: data.advertisedTxPower, name: data.nameOnAir(adapterAlias: alias)?.name,
                serviceUUIDs: data.serviceUUIDs, manufacturerData: data.manufacturerData, serviceData: data.serviceData)
        }
        let advertising = peripheral.powered && !advertisements.isEmpty
        device.spec.interval = advertising ? link.interval : 0
        device.spec.connectable = advertising && advertisements.contains(where: \.connectable)
        device.connectableAgain(in: self)
        device.spec.discoverable = advertisements.contains(where: \.isDiscoverable)
        device.spec.appearance = advertisements.compactMap(\.appearance).first
        device.spec.serviceUUIDs = advertisements.flatMap(\.serviceUUIDs)
        if advertising, isScanning(central), !schedule.contains(path) {
            // A controller's first advertising event follows the enable at once (then advDelay applies).
            schedule.insert(path, at: EventLoop.now())
            armSchedule()
        }
        // The GATT database.
        let (layout, targets) = peripheral.gatt.remoteLayout()
        guard layout != device.layout || device.mirror?.targets != targets else { return }
        for characteristic in device.characteristics where characteristic.target != nil {
            characteristic.stopNotifyTimer(in: self)
        }
        if device.gattExported {
            // Service Changed: the old objects go, the new ones come once discovered again.
            unexport(under: device.path, including: false)
            device.gattExported = false
        }
        device.layout = layout
        do { try device.buildCharacteristics() } catch { log?("simulator: \(error)") }
        device.mirror?.targets = targets
        for characteristic in device.characteristics {
            characteristic.target = targets[characteristic.handle]
            characteristic.mirrorDevice = device.path
        }
        if device.servicesResolved {
            exportGATT(device)
            for characteristic in device.characteristics where characteristic.isSubscribed {
                characteristic.startNotifyTimer(of: device, in: self)
            }
        }
    }

    // MARK: Links

    // MARK: Notifications through the link

    /// The central enabled the CCCD: the application gets StartNotify() (each peer enabling calls
    /// it again; applications make it idempotent).
    func enableCCCD(_ device: SimulatedDevice, _ target: ApplicationObject) {
        guard device.linkedTo != nil, device.servicesResolved,
            let peripheral = device.mirror.flatMap({ adapter(named: $0.peripheralAdapter) }),
            peripheral.gatt.subscribe(device.path, to: target)
        else { return }
        callApplication(target, interface: Self.characteristicInterface, "StartNotify")
    }

    /// The central disabled the CCCD (StopNotify, its client left, or the link went down): the
    /// application gets StopNotify() when no peer is subscribed any more.
    func disableCCCD(_ devicePath: DBusObjectPath, _ target: ApplicationObject) {
        for adapter in adapters where adapter.gatt.subscribers[target]?.contains(devicePath) == true {
            if adapter.gatt.unsubscribe(devicePath, from: target) {
                callApplication(target, interface: Self.characteristicInterface, "StopNotify")
            }
        }
    }

    /// The application emitted `PropertiesChanged(Value)`: a notification (or indication, then
    /// `Confirm()`) to every linked central whose CCCD is enabled. Values are cut at 512 bytes and
    /// to what one notification carries (MTU − 3).
    func applicationValueChanged(owner: String, path: DBusObjectPath, value: [UInt8]) {
        for adapter in adapters {
            notifySubscribers(of: adapter, owner: owner, path: path, value: value)
        }
    }

    private func notifySubscribers(of adapter: SimulatedAdapter, owner: String, path: DBusObjectPath, value: [UInt8]) {
        for (target, subscribers) in adapter.gatt.subscribers where target.owner == owner && target.path == path {
            var confirmed = false
            for devicePath in subscribers.sorted() {
                guard let device = devices[devicePath], case .connected = device.link,
                    let characteristic = device.characteristics.first(where: { $0.target == target })
                else { continue }
                characteristic.deliver(Array(value.prefix(min(512, Int(timing.mtu) - 3))), of: device, in: self)
                if !characteristic.has("notify") && characteristic.has("indicate") { confirmed = true }
            }
            if confirmed { callApplication(target, interface: Self.characteristicInterface, "Confirm") }
        }
    }
}
