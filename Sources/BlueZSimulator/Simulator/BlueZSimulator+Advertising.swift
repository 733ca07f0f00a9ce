import Bluetooth
import DBus
import EventLoop

/// An advertisement registered through `LEAdvertisingManager1.RegisterAdvertisement`.
/// Invariant behind `@unchecked Sendable`: confined to the loop thread, like ``SimulatedAdapter``.
final class RegisteredAdvertisement: @unchecked Sendable {
    let owner: String
    let path: DBusObjectPath
    /// The properties as last read (GetAll, then PropertiesChanged merged in).
    var properties: [String: DBusValue] = [:]
    /// Parsed data (nil while bluetoothd still waits for GetAll).
    var data: LEAdvertisementData?
    var timeoutTimer: EventLoop.Token?
    /// Stopped by a central's connection on a link that does not resume advertising
    /// (``LinkSpec/resumesAdvertising``); only a new registration starts it again.
    var stopped = false

    init(owner: String, path: DBusObjectPath) {
        self.owner = owner
        self.path = path
    }
}

extension BlueZSimulator {
    static let advertisingManagerInterfaceName = "org.bluez.LEAdvertisingManager1"
    static let advertisementInterface = "org.bluez.LEAdvertisement1"

    func advertisingManagerInterface(_ adapter: SimulatedAdapter) -> DBusInterface {
        let name = adapter.spec.name
        let instances = UInt8(clamping: adapter.spec.advertisingInstances)
        return DBusInterface(
            Self.advertisingManagerInterfaceName,
            methods: [
                .deferred("RegisterAdvertisement", in: nil) { call, reply in
                    self.onLoop { $0.registerAdvertisement(name, call, reply) }
                },
                .immediate("UnregisterAdvertisement", in: nil) { call in
                    try self.onLoop { try $0.unregisterAdvertisement(name, call) }
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

    /// `RegisterAdvertisement(o path, a{sv} options)`: AlreadyExists for the same sender and
    /// path; NotPermitted "Maximum advertisements reached" without a free instance; then
    /// (asynchronously) `GetAll(org.bluez.LEAdvertisement1)` on the caller, parsed and checked
    /// against the 31-byte legacy payload — Failed "Failed to parse advertisement." otherwise.
    func registerAdvertisement(_ name: String, _ call: DBusMessage, _ reply: DBusPendingReply) {
        guard let adapter = adapter(named: name), let owner = call.sender, call.arguments.count == 2,
            case .objectPath(let path) = call.arguments[0], case .dictionary(.string, _, _) = call.arguments[1]
        else { return reply.fail(BlueZError.invalidArguments) }
        guard !adapter.advertisements.contains(where: { $0.owner == owner && $0.path == path }) else {
            return reply.fail(BlueZError.alreadyExists)
        }
        guard adapter.advertisements.count < adapter.spec.advertisingInstances else {
            return reply.fail(BlueZError.notPermitted("Maximum advertisements reached"))
        }
        let advertisement = RegisteredAdvertisement(owner: owner, path: path)
        adapter.advertisements.append(advertisement)
        let generation = self.generation
        Task { await self.readAdvertisement(adapter, advertisement, reply, generation: generation) }
    }

    private func readAdvertisement(
        _ adapter: SimulatedAdapter, _ advertisement: RegisteredAdvertisement, _ reply: DBusPendingReply,
        generation: Int
    ) async {
        var outcome: Result<LEAdvertisementData, DBusError>
        var watching = false
        do {
            guard let connection else { throw DBusError(.disconnected, "crashed") }
            try await watchOwner(advertisement.owner)
            watching = true
            let values = try await connection.call(
                destination: advertisement.owner, path: advertisement.path, interface: Self.propertiesInterface,
                method: "GetAll", arguments: [.string(Self.advertisementInterface)])
            advertisement.properties = values.first?.dictionary ?? [:]
            outcome = Self.parseAdvertisement(advertisement.properties, adapter: adapter, log: log)
        } catch {
            log?("simulator: GetAll on advertisement \(advertisement.path) of \(advertisement.owner) failed: \(error)")
            outcome = .failure(LEAdvertisementData.parseError)
        }
        guard generation == self.generation, adapter.advertisements.contains(where: { $0 === advertisement }) else {
            if watching && generation == self.generation { unwatchOwner(advertisement.owner) }
            return reply.fail(BlueZError.failed("Failed to register advertisement"))
        }
        if case .success = outcome, !adapter.powered {
            outcome = .failure(BlueZError.failed("Failed to register advertisement"))
        }
        switch outcome {
        case .failure(let error):
            adapter.advertisements.removeAll { $0 === advertisement }
            if watching { unwatchOwner(advertisement.owner) }
            reply.fail(error)
        case .success(let data):
            advertisement.data = data
            if let timeout = data.timeout, timeout > 0 {
                let path = advertisement.path, owner = advertisement.owner, name = adapter.spec.name
                advertisement.timeoutTimer = after(Double(timeout)) { simulator in
                    guard let adapter = simulator.adapter(named: name),
                        let advertisement = adapter.advertisements.first(where: { $0.owner == owner && $0.path == path }
                        )
                    else { return }
                    simulator.releaseAdvertisement(advertisement, from: adapter)
                }
            }
            // What a scanning adapter cannot show (bluetoothd leaves solicited UUIDs out of
            // Device1) is in the line, for a test of a program that advertises.
            let solicited = data.solicitUUIDs.map(\.shortDescription).joined(separator: " ")
            log?(
                "simulator: \(adapter.spec.name) advertises \(advertisement.path) of \(advertisement.owner) (\(data.length(adapterAlias: adapter.spec.alias)) bytes"
                    + (solicited.isEmpty ? "" : ", solicited \(solicited)")
                    + (data.secondaryChannel.map { ", extended on \($0)" } ?? "") + ")"
            )
            reply.succeed()
            advertisingInstancesChanged(adapter)
            peripheralChanged(adapter)
        }
    }

    /// Parses properties and checks the payload length (the reply's error on failure).
    static func parseAdvertisement(
        _ properties: [String: DBusValue], adapter: SimulatedAdapter, log: (@Sendable (String) -> Void)?
    ) -> Result<LEAdvertisementData, DBusError> {
        do {
            let data = try LEAdvertisementData(properties: properties)
            if let channel = data.secondaryChannel, !adapter.spec.secondaryChannels.contains(channel) {
                log?("simulator: \(adapter.spec.name) has no extended advertising on \(channel)")
                return .failure(LEAdvertisementData.parseError)
            }
            guard data.fits else {
                log?(
                    "simulator: advertisement needs \(data.lengthWithoutName) bytes of \(data.maximumLength) (before the name)"
                )
                return .failure(LEAdvertisementData.parseError)
            }
            return .success(data)
        } catch {
            log?("simulator: advertisement refused: \(error)")
            return .failure(LEAdvertisementData.parseError)
        }
    }

    /// `UnregisterAdvertisement(o path)`: only the caller's own; DoesNotExist otherwise; no Release.
    func unregisterAdvertisement(_ name: String, _ call: DBusMessage) throws {
        guard let adapter = adapter(named: name), let owner = call.sender, call.arguments.count == 1,
            case .objectPath(let path) = call.arguments[0]
        else { throw BlueZError.invalidArguments }
        guard let advertisement = adapter.advertisements.first(where: { $0.owner == owner && $0.path == path }) else {
            throw BlueZError.doesNotExist
        }
        dropAdvertisement(advertisement, from: adapter)
    }

    func dropAdvertisement(_ advertisement: RegisteredAdvertisement, from adapter: SimulatedAdapter) {
        cancel(advertisement.timeoutTimer)
        adapter.advertisements.removeAll { $0 === advertisement }
        unwatchOwner(advertisement.owner)
        advertisingInstancesChanged(adapter)
        peripheralChanged(adapter)
    }

    /// bluetoothd drops the advertisement itself (Timeout, power-off): `Release()` (no reply expected).
    func releaseAdvertisement(_ advertisement: RegisteredAdvertisement, from adapter: SimulatedAdapter) {
        let owner = advertisement.owner, path = advertisement.path
        withBus {
            try $0.send(destination: owner, path: path, interface: Self.advertisementInterface, method: "Release")
        }
        log?("simulator: \(adapter.spec.name) released advertisement \(path) of \(owner)")
        dropAdvertisement(advertisement, from: adapter)
    }

    /// The application changed properties of a registered advertisement: bluetoothd re-reads
    /// them and refreshes the data (a change that no longer parses or fits is ignored, logged).
    func advertisementChanged(owner: String, path: DBusObjectPath, changed: [String: DBusValue], invalidated: [String])
    {
        for adapter in adapters {
            guard let advertisement = adapter.advertisements.first(where: { $0.owner == owner && $0.path == path }),
                advertisement.data != nil
            else { continue }
            var properties = advertisement.properties
            for (name, value) in changed { properties[name] = value.unwrapped }
            for name in invalidated { properties.removeValue(forKey: name) }
            switch Self.parseAdvertisement(properties, adapter: adapter, log: log) {
            case .success(let data):
                advertisement.properties = properties
                advertisement.data = data
                peripheralChanged(adapter)
            case .failure:
                log?("simulator: ignored a change of advertisement \(path): it no longer parses or fits")
            }
        }
    }

    /// `ActiveInstances` / `SupportedInstances` after a change.
    func advertisingInstancesChanged(_ adapter: SimulatedAdapter) {
        let active = adapter.advertisements.count
        let remaining = max(0, adapter.spec.advertisingInstances - active)
        change(
            [
                ("ActiveInstances", .byte(UInt8(clamping: active))),
                ("SupportedInstances", .byte(UInt8(clamping: remaining))),
            ],
            interface: Self.advertisingManagerInterfaceName, at: adapter.path)
    }

    /// Power-off: every advertisement of the adapter is released.
    func releaseAdvertisements(_ adapter: SimulatedAdapter) {
        for advertisement in adapter.advertisements where advertisement.data != nil {
            releaseAdvertisement(advertisement, from: adapter)
        }
    }
}
