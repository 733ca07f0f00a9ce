import Bluetooth
import DBus
import EventLoop

/// An advertisement registered through `LEAdvertisingManager1.RegisterAdvertisement`. Not
/// Sendable: owned by its adapter's ``AdvertisingManager``, touched only in the
/// ``BlueZSimulator`` actor's isolation.
final class RegisteredAdvertisement {
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

/// One adapter's `org.bluez.LEAdvertisingManager1` (bluetoothd 5.66 `src/advertising.c`): the
/// advertisements applications registered, in registration order, within the controller's
/// advertising instances. What it decides alone (``reserve(owner:path:)``, ``parse(_:log:)``,
/// the instance counts) needs no bus; the methods taking the simulator read the application's
/// properties, reply and signal. Not Sendable: owned by its ``SimulatedAdapter``.
final class AdvertisingManager: RegistrationManager {
    static let interfaceName = "org.bluez.LEAdvertisingManager1"
    static let advertisementInterface = "org.bluez.LEAdvertisement1"

    /// The adapter it belongs to (which owns it).
    unowned let adapter: SimulatedAdapter
    private(set) var advertisements: [RegisteredAdvertisement] = []

    init(adapter: SimulatedAdapter) {
        self.adapter = adapter
    }

    /// The adapter's name, alias, instances and secondary channels.
    var spec: AdapterSpec { adapter.spec }

    /// `ActiveInstances`: registered advertisements (those still being read included).
    var activeInstances: Int { advertisements.count }
    /// `SupportedInstances`: the instances still free.
    var supportedInstances: Int { max(0, spec.advertisingInstances - activeInstances) }

    /// The data of the advertisements on air: read, and not stopped by a central's connection.
    var onAir: [LEAdvertisementData] { advertisements.filter { !$0.stopped }.compactMap(\.data) }

    /// The registered advertisement of `owner` at `path`.
    func advertisement(owner: String, path: DBusObjectPath) -> RegisteredAdvertisement? {
        advertisements.first { $0.owner == owner && $0.path == path }
    }

    func contains(_ advertisement: RegisteredAdvertisement) -> Bool {
        advertisements.contains { $0 === advertisement }
    }

    /// Takes an instance for `owner`'s advertisement at `path` (until it is read or refused).
    /// - Throws: `AlreadyExists` for the same owner and path; `NotPermitted` "Maximum
    ///   advertisements reached" without a free instance.
    func reserve(owner: String, path: DBusObjectPath) throws -> RegisteredAdvertisement {
        guard advertisement(owner: owner, path: path) == nil else { throw BlueZError.alreadyExists }
        guard advertisements.count < spec.advertisingInstances else {
            throw BlueZError.notPermitted("Maximum advertisements reached")
        }
        let advertisement = RegisteredAdvertisement(owner: owner, path: path)
        advertisements.append(advertisement)
        return advertisement
    }

    func remove(_ advertisement: RegisteredAdvertisement) {
        advertisements.removeAll { $0 === advertisement }
    }

    /// Removes `owner`'s advertisements and returns them.
    func removeAll(owner: String) -> [RegisteredAdvertisement] {
        let removed = advertisements.filter { $0.owner == owner }
        advertisements.removeAll { $0.owner == owner }
        return removed
    }

    /// Parses properties and checks the payload against the controller: the secondary channel
    /// must be one it has, the data must fit (the reply's error on failure).
    func parse(_ properties: [String: DBusValue], log: (@Sendable (String) -> Void)?) -> Result<
        LEAdvertisementData, DBusError
    > {
        do {
            let data = try LEAdvertisementData(properties: properties)
            if let channel = data.secondaryChannel, !spec.secondaryChannels.contains(channel) {
                log?("simulator: \(spec.name) has no extended advertising on \(channel)")
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

    /// A central connected over a link that does not resume advertising: the connectable
    /// advertisements stop (until registered anew).
    func stopConnectable() {
        for advertisement in advertisements where advertisement.data?.connectable == true {
            advertisement.stopped = true
        }
    }

    // MARK: On the bus

    /// `RegisterAdvertisement(o path, a{sv} options)`: ``reserve(owner:path:)``, then
    /// (asynchronously) `GetAll(org.bluez.LEAdvertisement1)` on the caller, parsed and checked —
    /// Failed "Failed to parse advertisement." otherwise.
    func read(
        _ advertisement: RegisteredAdvertisement, _ reply: DBusPendingReply, generation: Int,
        in simulator: isolated BlueZSimulator
    ) async {
        guard
            let settled = await simulator.readRegistration(
                owner: advertisement.owner, path: advertisement.path, interface: BlueZSimulator.propertiesInterface,
                method: "GetAll", arguments: [.string(Self.advertisementInterface)], generation: generation, reply,
                refusal: "Failed to register advertisement", registered: { contains(advertisement) },
                read: { values in
                    advertisement.properties = values.first?.dictionary ?? [:]
                    return parse(advertisement.properties, log: simulator.log)
                },
                unreadable: { error in
                    simulator.log?(
                        "simulator: GetAll on advertisement \(advertisement.path) of \(advertisement.owner) failed: \(error)"
                    )
                    return LEAdvertisementData.parseError
                })
        else { return }
        var outcome = settled.outcome
        let watching = settled.watching
        if case .success = outcome, !adapter.powered {
            outcome = .failure(BlueZError.failed("Failed to register advertisement"))
        }
        switch outcome {
        case .failure(let error):
            remove(advertisement)
            if watching { simulator.unwatchOwner(advertisement.owner) }
            reply.fail(error)
        case .success(let data):
            advertisement.data = data
            if let timeout = data.timeout, timeout > 0 {
                let path = advertisement.path, owner = advertisement.owner, name = spec.name
                advertisement.timeoutTimer = simulator.after(Double(timeout)) {
                    guard let manager = simulator.adapter(named: name)?.advertising,
                        let advertisement = manager.advertisement(owner: owner, path: path)
                    else { return }
                    manager.release(advertisement, in: simulator)
                }
            }
            // What a scanning adapter cannot show (bluetoothd leaves solicited UUIDs out of
            // Device1) is in the line, for a test of a program that advertises.
            let solicited = data.solicitUUIDs.map(\.shortDescription).joined(separator: " ")
            simulator.log?(
                "simulator: \(spec.name) advertises \(advertisement.path) of \(advertisement.owner) (\(data.length(adapterAlias: spec.alias)) bytes"
                    + (solicited.isEmpty ? "" : ", solicited \(solicited)")
                    + (data.secondaryChannel.map { ", extended on \($0)" } ?? "") + ")"
            )
            reply.succeed()
            changed(in: simulator)
        }
    }

    /// `UnregisterAdvertisement(o path)`: only the caller's own; DoesNotExist otherwise; no Release.
    func unregister(_ call: DBusMessage, in simulator: isolated BlueZSimulator) throws {
        let (owner, path) = try BlueZSimulator.unregistration(call)
        guard let advertisement = advertisement(owner: owner, path: path) else { throw BlueZError.doesNotExist }
        drop(advertisement, in: simulator)
    }

    func drop(_ advertisement: RegisteredAdvertisement, in simulator: isolated BlueZSimulator) {
        simulator.cancel(advertisement.timeoutTimer)
        remove(advertisement)
        simulator.unwatchOwner(advertisement.owner)
        changed(in: simulator)
    }

    /// bluetoothd drops the advertisement itself (Timeout, power-off): `Release()` (no reply expected).
    func release(_ advertisement: RegisteredAdvertisement, in simulator: isolated BlueZSimulator) {
        let owner = advertisement.owner, path = advertisement.path
        simulator.withBus {
            try $0.send(destination: owner, path: path, interface: Self.advertisementInterface, method: "Release")
        }
        simulator.log?("simulator: \(spec.name) released advertisement \(path) of \(owner)")
        drop(advertisement, in: simulator)
    }

    /// Power-off: every advertisement that was read is released.
    func releaseAll(in simulator: isolated BlueZSimulator) {
        for advertisement in advertisements where advertisement.data != nil {
            release(advertisement, in: simulator)
        }
    }

    /// The application changed properties of a registered advertisement: bluetoothd re-reads
    /// them and refreshes the data (a change that no longer parses or fits is ignored, logged).
    func propertiesChanged(
        owner: String, path: DBusObjectPath, changed: [String: DBusValue], invalidated: [String],
        in simulator: isolated BlueZSimulator
    ) {
        guard let advertisement = advertisement(owner: owner, path: path), advertisement.data != nil else { return }
        var properties = advertisement.properties
        for (name, value) in changed { properties[name] = value.unwrapped }
        for name in invalidated { properties.removeValue(forKey: name) }
        switch parse(properties, log: simulator.log) {
        case .success(let data):
            advertisement.properties = properties
            advertisement.data = data
            simulator.peripheralChanged(adapter)
        case .failure:
            simulator.log?("simulator: ignored a change of advertisement \(path): it no longer parses or fits")
        }
    }

    /// `owner` left the bus: its advertisements go (no Release: it is gone). True when it had some.
    func clientLeft(_ owner: String, in simulator: isolated BlueZSimulator) -> Bool {
        let removed = removeAll(owner: owner)
        for advertisement in removed { simulator.cancel(advertisement.timeoutTimer) }
        return !removed.isEmpty
    }

    /// The crash: timers go with the daemon.
    func tearDown(in simulator: isolated BlueZSimulator) {
        for advertisement in advertisements { simulator.cancel(advertisement.timeoutTimer) }
    }

    /// The registrations changed: `ActiveInstances` / `SupportedInstances` and what linked adapters see.
    private func changed(in simulator: isolated BlueZSimulator) {
        instancesChanged(in: simulator)
        simulator.peripheralChanged(adapter)
    }

    func instancesChanged(in simulator: isolated BlueZSimulator) {
        simulator.change(
            [
                ("ActiveInstances", .byte(UInt8(clamping: activeInstances))),
                ("SupportedInstances", .byte(UInt8(clamping: supportedInstances))),
            ],
            interface: Self.interfaceName, at: adapter.path)
    }
}
