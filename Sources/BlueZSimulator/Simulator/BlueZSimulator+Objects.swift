import Bluetooth
import BluetoothManagement
import DBus

/// The bus glue: the objects the simulator exports, each method call dispatched to the object it
/// is for (on the loop thread, the simulator's executor), which answers it.
extension BlueZSimulator {
    static let adapterInterfaceName = SimulatedAdapter.interfaceName
    static let deviceInterface = "org.bluez.Device1"
    static let serviceInterface = "org.bluez.GattService1"
    static let characteristicInterface = "org.bluez.GattCharacteristic1"
    static let descriptorInterface = "org.bluez.GattDescriptor1"
    static let optionsSignature: DBusSignature = [.dictionary(key: .string, value: .variant)]

    /// Runs a handler on the simulator (handlers are called on the loop thread, which is its executor).
    nonisolated func onLoop<T: Sendable>(_ body: (isolated BlueZSimulator) throws -> T) rethrows -> T {
        try assumeIsolated(body)
    }

    /// Runs a deferred method's handler on the simulator; what it throws is the reply.
    nonisolated func onLoop(replying reply: DBusPendingReply, _ body: (isolated BlueZSimulator) throws -> Void) {
        do { try onLoop(body) } catch { reply.fail(BlueZError.reply(for: error)) }
    }

    // MARK: /org/bluez

    func agentManagerInterfaces() -> [DBusInterface] {
        [
            DBusInterface(
                "org.bluez.AgentManager1",
                methods: [
                    .immediate("RegisterAgent", in: [.objectPath, .string]) { call in
                        try self.onLoop { try $0.registerAgent(call) }
                        return []
                    },
                    .immediate("UnregisterAgent", in: [.objectPath]) { call in
                        try self.onLoop { try $0.unregisterAgent(call) }
                        return []
                    },
                    .immediate("RequestDefaultAgent", in: [.objectPath]) { call in
                        try self.onLoop { simulator in
                            guard let sender = call.sender, simulator.agents[sender] == call.arguments[0].objectPath
                            else {
                                throw BlueZError.doesNotExist
                            }
                            simulator.agentOrder.removeAll { $0 == sender }
                            simulator.agentOrder.insert(sender, at: 0)
                        }
                        return []
                    },
                ]),
            DBusInterface(
                "org.bluez.ProfileManager1",
                methods: [
                    .immediate(
                        "RegisterProfile", in: [.objectPath, .string, .dictionary(key: .string, value: .variant)]
                    ) { _ in
                        throw BlueZError.notSupported
                    },
                    .immediate("UnregisterProfile", in: [.objectPath]) { _ in throw BlueZError.doesNotExist },
                ]),
        ]
    }

    func registerAgent(_ call: DBusMessage) throws {
        guard let sender = call.sender, let path = call.arguments[0].objectPath,
            let capability = call.arguments[1].string
        else {
            throw BlueZError.invalidArguments
        }
        let known = ["", "DisplayOnly", "DisplayYesNo", "KeyboardOnly", "NoInputNoOutput", "KeyboardDisplay"]
        guard known.contains(capability) else { throw BlueZError.invalidArguments }
        guard agents[sender] == nil else { throw BlueZError.alreadyExists }
        agents[sender] = path
        agentOrder.append(sender)
    }

    func unregisterAgent(_ call: DBusMessage) throws {
        guard let sender = call.sender, let path = call.arguments[0].objectPath, agents[sender] == path else {
            throw BlueZError.doesNotExist
        }
        agents.removeValue(forKey: sender)
        agentOrder.removeAll { $0 == sender }
    }

    // MARK: Adapter1

    func adapterInterface(_ adapter: SimulatedAdapter) -> DBusInterface {
        let name = adapter.spec.name
        let spec = adapter.spec
        let localUUIDs = [0x1800, 0x1801, 0x180A].map { BluetoothUUID(UInt16($0)).description }
        return DBusInterface(
            Self.adapterInterfaceName,
            methods: [
                .immediate("StartDiscovery") { call in
                    try self.onLoop { try $0.adapter(name, for: call).startDiscovery(try client(call), in: $0) }
                    return []
                },
                .immediate("StopDiscovery") { call in
                    try self.onLoop { try $0.adapter(name, for: call).stopDiscovery(try client(call), in: $0) }
                    return []
                },
                .immediate("SetDiscoveryFilter", in: Self.optionsSignature) { call in
                    try self.onLoop {
                        try $0.adapter(name, for: call).setDiscoveryFilter(
                            call.arguments[0].entries ?? [], for: try client(call))
                    }
                    return []
                },
                .immediate("GetDiscoveryFilters", out: [.array(.string)]) { _ in
                    [.strings(DiscoveryFilter.supportedKeys)]
                },
                .deferred("RemoveDevice", in: [.objectPath]) { call, reply in
                    self.onLoop { simulator in
                        guard let adapter = simulator.adapter(named: name) else {
                            return reply.fail(BlueZError.invalidArguments)
                        }
                        adapter.removeDevice(call, reply, in: simulator)
                    }
                },
            ],
            properties: [
                DBusProperty("Address", type: .string, value: .string(spec.address.description)),
                DBusProperty("AddressType", type: .string, value: "public"),
                DBusProperty("Name", type: .string, value: .string(spec.alias)),
                DBusProperty(
                    "Alias", type: .string, access: .readwrite, value: .string(spec.alias),
                    onSet: { value, _ in
                        if value.string == "" {
                            self.onLoop { simulator in
                                simulator.loop.execute {
                                    simulator.assumeIsolated { simulator in
                                        guard let adapter = simulator.adapter(named: name) else { return }
                                        simulator.change(
                                            [("Alias", .string(spec.alias))], interface: Self.adapterInterfaceName,
                                            at: adapter.path)
                                    }
                                }
                            }
                        }
                    }),
                DBusProperty("Class", type: .uint32, value: .uint32(0)),
                DBusProperty(
                    "Powered", type: .boolean, access: .readwrite, value: .boolean(adapter.powered),
                    onSet: { value, _ in
                        let on = value.bool ?? false
                        try self.onLoop { simulator in
                            // bluetoothd 5.66 answers a power-on of a blocked radio so (mgmt's RFKILLED).
                            if on, simulator.adapter(named: name)?.blocked == true {
                                throw BlueZError.failed("Blocked through rfkill")
                            }
                        }
                        self.onLoop { simulator in
                            simulator.loop.execute {
                                simulator.assumeIsolated {
                                    $0.adapter(named: name)?.setPowered(on, fromClient: true, in: $0)
                                }
                            }
                        }
                    }),
                DBusProperty(
                    "Discoverable", type: .boolean, access: .readwrite, value: false,
                    onSet: { _, _ in
                        try self.onLoop { simulator in
                            guard simulator.adapter(named: name)?.powered == true else { throw BlueZError.notReady }
                        }
                    }),
                DBusProperty("DiscoverableTimeout", type: .uint32, access: .readwrite, value: .uint32(180)),
                DBusProperty("Pairable", type: .boolean, access: .readwrite, value: true),
                DBusProperty("PairableTimeout", type: .uint32, access: .readwrite, value: .uint32(0)),
                DBusProperty("Discovering", type: .boolean, value: false),
                DBusProperty("UUIDs", type: .array(.string), value: .strings(localUUIDs)),
                DBusProperty("Modalias", type: .string, value: "usb:v1D6Bp0246d0542"),
                DBusProperty("Roles", type: .array(.string), value: .strings(["central", "peripheral"])),
            ]
                // bluetoothd 5.66 has `PowerState` only with Experimental = true (AdapterSpec.powerState).
                + (spec.powerState
                    ? [DBusProperty("PowerState", type: .string, value: .string(adapter.powerState))] : []))
    }

    /// The adapter a call to `Adapter1` of `name` is for (InvalidArguments without a sender).
    func adapter(_ name: String, for call: DBusMessage) throws -> SimulatedAdapter {
        guard let adapter = adapter(named: name), call.sender != nil else { throw BlueZError.invalidArguments }
        return adapter
    }

    /// The interfaces of an adapter's object.
    func adapterInterfaces(_ adapter: SimulatedAdapter) -> [DBusInterface] {
        [adapterInterface(adapter), gattManagerInterface(adapter), advertisingManagerInterface(adapter)]
    }

    func gattManagerInterface(_ adapter: SimulatedAdapter) -> DBusInterface {
        let name = adapter.spec.name
        return DBusInterface(
            GATTApplications.interfaceName,
            methods: [
                // Signatures are checked by the handlers, so wrong arguments get bluetoothd's
                // InvalidArguments rather than the export layer's InvalidArgs.
                .deferred("RegisterApplication", in: nil) { call, reply in
                    self.onLoop(replying: reply) {
                        try $0.register(call, reply, with: $0.adapter(name, for: call).gatt)
                    }
                },
                .immediate("UnregisterApplication", in: nil) { call in
                    try self.onLoop { try $0.adapter(name, for: call).gatt.unregister(call, in: $0) }
                    return []
                },
            ])
    }

    func advertisingManagerInterface(_ adapter: SimulatedAdapter) -> DBusInterface {
        let name = adapter.spec.name
        let instances = UInt8(clamping: adapter.spec.advertisingInstances)
        return DBusInterface(
            AdvertisingManager.interfaceName,
            methods: [
                .deferred("RegisterAdvertisement", in: nil) { call, reply in
                    self.onLoop(replying: reply) {
                        try $0.register(call, reply, with: $0.adapter(name, for: call).advertising)
                    }
                },
                .immediate("UnregisterAdvertisement", in: nil) { call in
                    try self.onLoop { try $0.adapter(name, for: call).advertising.unregister(call, in: $0) }
                    return []
                },
            ],
            properties: [
                DBusProperty("ActiveInstances", type: .byte, value: .byte(0)),
                DBusProperty("SupportedInstances", type: .byte, value: .byte(instances)),
                DBusProperty(
                    "SupportedIncludes", type: .array(.string), value: .strings(LEAdvertisementData.supportedIncludes)),
            ]
                + (adapter.spec.secondaryChannels.isEmpty
                    ? []
                    : [
                        DBusProperty(
                            "SupportedSecondaryChannels", type: .array(.string),
                            value: .strings(adapter.spec.secondaryChannels))
                    ]))
    }

    // MARK: Device1

    func deviceInterface(_ device: SimulatedDevice) -> DBusInterface {
        let path = device.path
        let spec = device.spec
        let cache = device.cache
        func optional<T>(_ value: T?, _ make: (T) -> DBusValue) -> DBusValue? { value.map(make) }
        return DBusInterface(
            Self.deviceInterface,
            methods: [
                .deferred("Connect") { _, reply in
                    self.onLoop(replying: reply) { simulator in
                        try simulator.exportedDevice(path).connect(reply, in: simulator)
                    }
                },
                .deferred("Disconnect") { _, reply in
                    self.onLoop { simulator in
                        guard let device = simulator.devices[path] else { return reply.succeed() }
                        device.disconnect(reply, in: simulator)
                    }
                },
                .deferred("Pair") { call, reply in
                    self.onLoop(replying: reply) { simulator in
                        try simulator.exportedDevice(path).pair(reply, caller: call.sender, in: simulator)
                    }
                },
                .immediate("CancelPairing") { _ in
                    try self.onLoop { simulator in
                        guard let device = simulator.devices[path] else { throw BlueZError.doesNotExist }
                        try device.cancelPairing(in: simulator)
                    }
                    return []
                },
                .immediate("ConnectProfile", in: [.string]) { _ in throw BlueZError.notSupported },
                .immediate("DisconnectProfile", in: [.string]) { _ in throw BlueZError.notSupported },
            ],
            properties: [
                DBusProperty("Address", type: .string, value: .string(spec.address.description)),
                DBusProperty("AddressType", type: .string, value: .string(spec.addressType.rawValue)),
                DBusProperty("Name", type: .string, value: optional(cache.name) { .string($0) }),
                DBusProperty(
                    "Alias", type: .string, access: .readwrite, value: .string(device.aliasValue),
                    onSet: { value, _ in
                        let text = value.string ?? ""
                        self.onLoop { simulator in
                            guard let device = simulator.devices[path] else { return }
                            device.alias = text.isEmpty ? nil : text
                            if text.isEmpty {
                                simulator.loop.execute {
                                    simulator.assumeIsolated { simulator in
                                        guard let device = simulator.devices[path], device.exported else { return }
                                        simulator.change(
                                            [("Alias", .string(device.aliasValue))], interface: Self.deviceInterface,
                                            at: path)
                                    }
                                }
                            }
                        }
                    }),
                DBusProperty("Appearance", type: .uint16, value: optional(spec.appearance) { .uint16($0) }),
                DBusProperty("Paired", type: .boolean, value: .boolean(device.paired)),
                DBusProperty("Bonded", type: .boolean, value: .boolean(device.paired)),
                DBusProperty(
                    "Trusted", type: .boolean, access: .readwrite, value: .boolean(device.trusted),
                    onSet: { value, _ in self.onLoop { $0.devices[path]?.trusted = value.bool ?? false } }),
                DBusProperty(
                    "Blocked", type: .boolean, access: .readwrite, value: .boolean(device.blocked),
                    onSet: { value, _ in
                        let blocked = value.bool ?? false
                        self.onLoop { simulator in
                            simulator.devices[path]?.blocked = blocked
                            if blocked {
                                simulator.loop.execute {
                                    simulator.assumeIsolated { $0.devices[path]?.peerDisconnect(.localHost, in: $0) }
                                }
                            }
                        }
                    }),
                DBusProperty("LegacyPairing", type: .boolean, value: false),
                DBusProperty("RSSI", type: .int16, value: optional(cache.rssi) { .int16($0) }),
                DBusProperty("Connected", type: .boolean, value: .boolean(device.isConnected)),
                DBusProperty(
                    "UUIDs", type: .array(.string), value: device.uuidsValue.isEmpty ? nil : .strings(device.uuidsValue)
                ),
                DBusProperty("Adapter", type: .objectPath, value: .objectPath(device.adapter.path)),
                DBusProperty(
                    "ManufacturerData", type: .dictionary(key: .uint16, value: .variant),
                    value: cache.manufacturerDataValue),
                DBusProperty(
                    "ServiceData", type: .dictionary(key: .string, value: .variant), value: cache.serviceDataValue
                ),
                DBusProperty("TxPower", type: .int16, value: optional(cache.txPower) { .int16($0) }),
                DBusProperty("ServicesResolved", type: .boolean, value: .boolean(device.servicesResolved)),
            ])
    }

    // MARK: GATT objects

    /// Exports the device's services, characteristics and descriptors (one InterfacesAdded each,
    /// parents first), as bluetoothd does after the first discovery of the remote database.
    func exportGATT(_ device: SimulatedDevice) {
        guard !device.gattExported else { return }
        device.gattExported = true
        let mtu = DBusValue.uint16(timing.mtu)
        var objects: [(DBusObjectPath, DBusInterface)] = []
        for service in device.layout.services where service.exported {
            guard let servicePath = try? device.path.appending(GATTLayout.element("service", service.handle)) else {
                continue
            }
            objects.append(
                (
                    servicePath,
                    DBusInterface(
                        Self.serviceInterface,
                        properties: [
                            DBusProperty("UUID", type: .string, value: .string(service.uuid.description)),
                            DBusProperty("Device", type: .objectPath, value: .objectPath(device.path)),
                            DBusProperty("Primary", type: .boolean, value: true),
                            DBusProperty("Includes", type: .array(.objectPath), value: .objectPaths([])),
                        ])
                ))
            for characteristic in device.characteristics where characteristic.servicePath == servicePath {
                objects.append(
                    (
                        characteristic.path,
                        characteristicDefinition(
                            device, characteristic, mtu: device.isConnected && timing.mtuProperty ? mtu : nil)
                    ))
                for descriptor in characteristic.descriptors {
                    objects.append((descriptor.path, descriptorDefinition(device, characteristic, descriptor)))
                }
            }
        }
        withBus { connection in
            for (path, interface) in objects { try connection.export([interface], at: path) }
        }
    }

    func characteristicDefinition(_ device: SimulatedDevice, _ characteristic: SimulatedCharacteristic, mtu: DBusValue?)
        -> DBusInterface
    {
        let devicePath = device.path
        let path = characteristic.path
        var methods: [DBusMethod] = [
            .deferred("ReadValue", in: Self.optionsSignature, out: [.array(.byte)]) { call, reply in
                self.onLoop(replying: reply) { simulator in
                    let (device, characteristic) = try simulator.characteristic(path, of: devicePath)
                    characteristic.read(call, reply, of: device, in: simulator)
                }
            },
            .deferred("WriteValue", in: [.array(.byte), .dictionary(key: .string, value: .variant)]) { call, reply in
                self.onLoop(replying: reply) { simulator in
                    let (device, characteristic) = try simulator.characteristic(path, of: devicePath)
                    characteristic.write(call, reply, of: device, in: simulator)
                }
            },
            .immediate("StartNotify") { call in
                try self.onLoop { simulator in
                    let (device, characteristic) = try simulator.characteristic(path, of: devicePath)
                    guard let client = call.sender else {
                        throw DBusError(.unknownObject, "No such object path '\(path)'")
                    }
                    try characteristic.startNotify(client, of: device, in: simulator)
                }
                return []
            },
            .immediate("StopNotify") { call in
                try self.onLoop { simulator in
                    let (_, characteristic) = try simulator.characteristic(path, of: devicePath)
                    guard let client = call.sender else {
                        throw DBusError(.unknownObject, "No such object path '\(path)'")
                    }
                    try characteristic.stopNotify(client, in: simulator)
                }
                return []
            },
            .immediate("AcquireWrite", in: Self.optionsSignature, out: [.unixFD, .uint16]) { call in
                try self.onLoop { simulator in
                    let (device, characteristic) = try simulator.characteristic(path, of: devicePath)
                    return try characteristic.acquire(call, notify: false, of: device, in: simulator)
                }
            },
            .immediate("AcquireNotify", in: Self.optionsSignature, out: [.unixFD, .uint16]) { call in
                try self.onLoop { simulator in
                    let (device, characteristic) = try simulator.characteristic(path, of: devicePath)
                    return try characteristic.acquire(call, notify: true, of: device, in: simulator)
                }
            },
        ]
        methods.append(.immediate("Confirm") { _ in [] })
        let flags = characteristic.spec.flags.filter { !$0.hasPrefix("encrypt") }
        var properties = [
            DBusProperty("UUID", type: .string, value: .string(characteristic.uuid.description)),
            DBusProperty("Service", type: .objectPath, value: .objectPath(characteristic.servicePath)),
            DBusProperty("Value", type: .array(.byte), value: .bytes([])),
            DBusProperty(
                "Notifying", type: .boolean,
                value: characteristic.canNotify ? .boolean(!characteristic.notifySessions.isEmpty) : nil),
            DBusProperty("Flags", type: .array(.string), value: .strings(flags)),
            DBusProperty(
                "WriteAcquired", type: .boolean,
                value: characteristic.has("write-without-response") ? .boolean(false) : nil),
            DBusProperty("NotifyAcquired", type: .boolean, value: characteristic.has("notify") ? .boolean(false) : nil),
            DBusProperty("MTU", type: .uint16, value: mtu),
        ]
        properties.sort { Self.characteristicOrder($0.name) < Self.characteristicOrder($1.name) }
        return DBusInterface(Self.characteristicInterface, methods: methods, properties: properties)
    }

    static func characteristicOrder(_ name: String) -> Int {
        ["UUID", "Service", "Value", "Notifying", "Flags", "WriteAcquired", "NotifyAcquired", "MTU"].firstIndex(
            of: name) ?? 99
    }

    func descriptorDefinition(
        _ device: SimulatedDevice, _ characteristic: SimulatedCharacteristic,
        _ descriptor: SimulatedCharacteristic.Descriptor
    ) -> DBusInterface {
        let devicePath = device.path
        let path = descriptor.path
        let characteristicPath = characteristic.path
        return DBusInterface(
            Self.descriptorInterface,
            methods: [
                .deferred("ReadValue", in: Self.optionsSignature, out: [.array(.byte)]) { call, reply in
                    self.onLoop(replying: reply) { simulator in
                        let (device, characteristic) = try simulator.characteristic(characteristicPath, of: devicePath)
                        characteristic.readDescriptor(at: path, call, reply, of: device, in: simulator)
                    }
                },
                .deferred("WriteValue", in: [.array(.byte), .dictionary(key: .string, value: .variant)]) {
                    call, reply in
                    self.onLoop(replying: reply) { simulator in
                        let (device, characteristic) = try simulator.characteristic(characteristicPath, of: devicePath)
                        characteristic.writeDescriptor(at: path, call, reply, of: device, in: simulator)
                    }
                },
            ],
            properties: [
                DBusProperty("UUID", type: .string, value: .string(descriptor.uuid.description)),
                DBusProperty("Characteristic", type: .objectPath, value: .objectPath(characteristicPath)),
                DBusProperty("Value", type: .array(.byte), value: .bytes([])),
            ])
    }
}

/// The unique name of a method call's sender (InvalidArguments without one).
private func client(_ call: DBusMessage) throws -> String {
    guard let sender = call.sender else { throw BlueZError.invalidArguments }
    return sender
}
