import BlueZ
import DBus
import EventLoop
import GatewayRuntime
import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The Bluetooth checks of `gattway doctor`, each bounded by ``timeout``: the system bus,
/// bluetoothd (`org.bluez`) on it, whether the bus lets us talk to it, and the adapter — the
/// last decided by a ``CentralManager``, so doctor and `gattway run` agree on what "ready" means.
struct BlueZDiagnosis {
    /// An adapter as BlueZ exports it.
    struct Adapter: Sendable {
        var name: String
        var address: String
        var powered: Bool
        var central: Bool
    }

    let adapter: String
    /// The adapter of the peripheral role (`peripheral.adapter` or `bluetooth.adapter`) when the
    /// configuration's role includes it; nil: not checked.
    var peripheral: (adapter: String, advertising: Bool)? = nil
    let timeout: Duration
    let loop: EventLoop

    func run() async -> [DoctorCheck] {
        var checks: [DoctorCheck] = []
        let bus = DBusConnection.Bus.system
        let address = (try? bus.resolvedAddress()) ?? "?"
        let fromEnvironment = getenv("DBUS_SYSTEM_BUS_ADDRESS") != nil
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.connect(to: bus, on: loop)
        } catch {
            let fix =
                fromEnvironment
                ? "DBUS_SYSTEM_BUS_ADDRESS is set: is that bus running? unset it to use the machine's system bus"
                : "is dbus running? sudo systemctl start dbus"
            checks.append(.fail("bus", "cannot connect to the D-Bus system bus at \(address): \(error)", fix))
            checks.append(.fail("bluez", "not checked: no system bus"))
            return checks
        }
        checks.append(
            .ok(
                "bus",
                "system bus \(address)"
                    + (fromEnvironment ? " (from DBUS_SYSTEM_BUS_ADDRESS, not the machine's default bus)" : "")))
        checks += await probe(connection)
        await connection.close()
        return checks
    }

    /// bluetoothd on the bus, access to it, and the adapter.
    private func probe(_ connection: DBusConnection) async -> [DoctorCheck] {
        var checks: [DoctorCheck] = []

        // bluetoothd present?
        let owner: String?
        do {
            owner = try await connection.nameOwner("org.bluez")
        } catch {
            checks.append(
                .fail(
                    "bluez", "the bus did not say who owns org.bluez: \(error)", "sudo systemctl restart dbus bluetooth"
                ))
            return checks
        }
        guard let owner else {
            let (found, fix) = advice(.bluetoothdGone)
            checks.append(.fail("bluez", found, fix))
            return checks
        }

        // Allowed to talk to it, and answering?
        let objects: [String: DBusValue]
        do {
            let reply = try await connection.call(
                destination: "org.bluez", path: .root, interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects", timeout: timeout)
            objects = reply.first?.dictionary ?? [:]
        } catch let error as DBusError where error.name == .accessDenied {
            checks.append(.ok("bluez", "org.bluez is on the bus (\(owner))"))
            let (found, fix) = advice(.accessDenied)
            checks.append(.fail("access", found, fix))
            return checks
        } catch let error as DBusError where error.name == .noReply || error.name == .timeout {
            checks.append(
                .fail(
                    "bluez", "org.bluez (\(owner)) did not answer GetManagedObjects within \(seconds) s",
                    "bluetoothd looks wedged: sudo systemctl restart bluetooth; journalctl -u bluetooth"))
            return checks
        } catch {
            checks.append(
                .fail("bluez", "org.bluez (\(owner)) failed GetManagedObjects: \(error)", "journalctl -u bluetooth"))
            return checks
        }
        let adapters = Self.adapters(in: objects)
        let devices = objects.values.filter { $0.dictionary?["org.bluez.Device1"] != nil }.count
        checks.append(
            .ok(
                "bluez",
                "org.bluez is on the bus (\(owner)): \(adapters.count) adapter\(adapters.count == 1 ? "" : "s"), \(devices) device objects"
            ))
        checks.append(.ok("access", "org.bluez answers \(FileDiagnosis.userName)"))
        if devices > 1000 {
            checks.append(
                .warn(
                    "bluez", "bluetoothd holds \(devices) device objects (one per random address it heard)",
                    "lower TemporaryTimeout in /etc/bluetooth/main.conf, or restart bluetooth; docs/raspberry-pi.md"))
        }
        checks.append(await adapterCheck(adapters))
        if let peripheral {
            checks.append(
                Self.peripheralCheck(objects, adapter: peripheral.adapter, advertising: peripheral.advertising))
        }
        return checks
    }

    /// The peripheral role needs `GattManager1` on its adapter, and `LEAdvertisingManager1` with
    /// a free advertising instance when it advertises.
    static func peripheralCheck(_ objects: [String: DBusValue], adapter name: String, advertising: Bool) -> DoctorCheck
    {
        guard
            let interfaces = objects.first(where: {
                $0.key.hasSuffix("/" + name) && $0.value.dictionary?["org.bluez.Adapter1"] != nil
            })?
            .value.dictionary
        else {
            return .fail(
                "peripheral", "no adapter \(name) for the peripheral role",
                "set peripheral.adapter to an adapter bluetoothctl list shows")
        }
        guard interfaces["org.bluez.GattManager1"] != nil else {
            return .fail(
                "peripheral", "\(name) has no org.bluez.GattManager1: bluetoothd cannot serve GATT applications on it",
                "use BlueZ 5.50 or later (bluetoothd --version)")
        }
        guard advertising else { return .ok("peripheral", "\(name) can serve GATT applications (advertising off)") }
        guard let manager = interfaces["org.bluez.LEAdvertisingManager1"]?.dictionary else {
            let powered = interfaces["org.bluez.Adapter1"]?.dictionary?["Powered"]?.bool ?? false
            return .fail(
                "peripheral", "\(name) has no org.bluez.LEAdvertisingManager1: it cannot advertise",
                powered
                    ? "the controller does not support LE advertising; use another adapter (peripheral.adapter)"
                    : "bluetoothd offers it once the adapter is powered: bluetoothctl power on")
        }
        let free = manager["SupportedInstances"]?.int ?? 0
        let active = manager["ActiveInstances"]?.int ?? 0
        guard free > 0 else {
            return .fail(
                "peripheral", "\(name) has no free advertising instance (\(active) in use)",
                "another program advertises on \(name) (bluetoothctl advertise off), or use another adapter")
        }
        // Extended advertising (up to 251 bytes, used when the advertisement does not fit 31).
        let channels = manager["SupportedSecondaryChannels"]?.strings ?? []
        let extended =
            channels.isEmpty
            ? "legacy advertising only, 31 bytes"
            : "extended advertising on \(channels.joined(separator: ", ")), up to 251 bytes"
        return .ok(
            "peripheral",
            "\(name) can serve GATT applications and advertise (\(free) advertising instance\(free == 1 ? "" : "s") free; \(extended))"
        )
    }

    /// The adapter the gateway would use, judged by a ``CentralManager`` with the configured selector.
    private func adapterCheck(_ adapters: [Adapter]) async -> DoctorCheck {
        let selector = AdapterSelector(adapter)
        let state: CentralState
        let condition: AdapterCondition
        do {
            let central = try await CentralManager.start(options: CentralOptions(adapter: selector), on: loop)
            state = await central.state
            condition = AdapterAdvice.refined(await central.condition)
            await central.close()
        } catch {
            return .fail("adapter", "cannot start the central: \(error)")
        }
        let chosen = adapters.filter { candidate in
            switch selector {
            case .first: candidate.central
            case .name(let name): candidate.name == name
            case .address(let address): candidate.address.uppercased() == address.description.uppercased()
            }
        }
        let adapter = chosen.first { $0.powered } ?? chosen.first
        let label = adapter.map { "\($0.name) (\($0.address))" } ?? "\(selector)"
        let present = adapters.map { AdapterAdvice.present($0.name, powered: $0.powered) }
        let (found, fix) = AdapterAdvice.advice(condition, label: label, selector: self.adapter, present: present)
        switch state {
        case .poweredOn:
            return .ok("adapter", found)
        case .poweredOff, .unsupported:
            return .fail("adapter", found, fix)
        case .unauthorized:
            return .fail("adapter", "not checked: the bus refused access to org.bluez")
        case .resetting, .unknown:
            return .fail(
                "adapter", "bluetoothd went away while checking (state \(state))", "sudo systemctl status bluetooth")
        }
    }

    private var seconds: Int { Int(timeout.components.seconds) }

    /// Adapters in a `GetManagedObjects` reply, by object path.
    static func adapters(in objects: [String: DBusValue]) -> [Adapter] {
        objects.keys.sorted().compactMap { path in
            guard let properties = objects[path]?.dictionary?["org.bluez.Adapter1"]?.dictionary else { return nil }
            let roles = properties["Roles"]?.strings
            return Adapter(
                name: String(path.split(separator: "/").last ?? ""),
                address: properties["Address"]?.string ?? "?",
                powered: properties["Powered"]?.bool ?? false,
                central: roles == nil || roles?.contains("central") == true)
        }
    }

    /// What was found and what to do in `condition`, worded as `gattway run` says it.
    private func advice(_ condition: AdapterCondition) -> (found: String, fix: String) {
        AdapterAdvice.advice(condition, label: adapter, selector: adapter, present: [])
    }
}
