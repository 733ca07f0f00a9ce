import Bluetooth
import JSON
import LocalSystem
import Parsers

/// A virtual Bluetooth world for the simulator: adapters, the devices around them (advertising,
/// connectable, with GATT trees and fault knobs) and timed events. Documented in docs/simulator.md.
public struct Scenario: Sendable {
    public var adapters: [AdapterSpec]
    public var devices: [DeviceSpec]
    public var events: [TimedEvent]
    /// Seed of every random generator, so runs repeat.
    public var seed: UInt64
    /// BlueZ's own delays (disconnect timer, temporary-device timeout, …), scalable for tests.
    public var timing: TimingSpec
    /// Adapters within radio range of each other (like `btvirt -l2`): what one advertises the
    /// other discovers, and the other can connect to its GATT applications.
    public var links: [LinkSpec]

    public init(
        adapters: [AdapterSpec], devices: [DeviceSpec] = [], events: [TimedEvent] = [], seed: UInt64 = 1,
        timing: TimingSpec = TimingSpec(), links: [LinkSpec] = []
    ) {
        self.adapters = adapters
        self.devices = devices
        self.events = events
        self.seed = seed
        self.timing = timing
        self.links = links
    }

    /// Reads a scenario file; every error names the JSON path.
    public static func load(path: String) throws -> Scenario {
        let bytes: [UInt8]
        do {
            bytes = try LocalFile.contents(path)
        } catch {
            throw ScenarioError(path: "", message: error.description)
        }
        return try parse(bytes)
    }

    /// Parses scenario JSON; every error names the JSON path.
    public static func parse(_ json: some Collection<UInt8>) throws -> Scenario {
        let root = try JSONReader.parse(json).object()
        let seed = try root.optional("seed")?.integer(in: 0...Int.max) ?? 1
        var adapters = try root.optional("adapters")?.array().map(AdapterSpec.read) ?? []
        if adapters.isEmpty { adapters = [AdapterSpec(name: "hci0", address: BluetoothAddress("00:AA:01:00:00:00")!)] }
        var names = Set<String>()
        for (index, adapter) in adapters.enumerated() where !names.insert(adapter.name).inserted {
            throw ScenarioError(path: "adapters[\(index)].name", message: "\"\(adapter.name)\" is used twice")
        }
        let devicesReader = try root.optional("devices")?.array() ?? []
        var devices: [DeviceSpec] = []
        var addresses = Set<String>()
        for reader in devicesReader {
            let device = try DeviceSpec.read(reader, adapters: names, defaultAdapter: adapters[0].name)
            let key = device.adapter + "/" + device.address.description
            guard addresses.insert(key).inserted else {
                throw ScenarioError(
                    path: reader.path + ".address", message: "\(device.address) is used twice on \(device.adapter)")
            }
            devices.append(device)
        }
        let events = try root.optional("events")?.array().map { try TimedEvent.read($0, adapters: names) } ?? []
        let timing = try root.optional("timing").map(TimingSpec.read) ?? TimingSpec()
        let links = try root.optional("links")?.array().map { try LinkSpec.read($0, adapters: names) } ?? []
        try root.finish()
        return Scenario(
            adapters: adapters, devices: devices, events: events.sorted { $0.at < $1.at }, seed: UInt64(seed),
            timing: timing, links: links)
    }
}

/// A local controller (`/org/bluez/hciN`).
public struct AdapterSpec: Sendable, Equatable {
    public var name: String
    public var address: BluetoothAddress
    public var alias: String
    public var powered: Bool
    /// The first N `StartDiscovery` calls fail with `InProgress` "Operation already in progress",
    /// as when the kernel refuses to scan because another stack or process is scanning.
    public var startDiscoveryFailures: Int
    /// Advertising instances the controller offers (`SupportedInstances` when none is registered).
    public var advertisingInstances: Int
    /// Secondary channels of extended advertising the controller supports
    /// (`LEAdvertisingManager1.SupportedSecondaryChannels`, absent when empty: legacy only).
    public var secondaryChannels: [String] = []
    /// Whether the adapter is there at start (false: plugged in later with
    /// ``BlueZSimulator/setPresent(adapter:_:)``, as a USB dongle).
    public var present = true
    /// The radio is blocked by rfkill at start: powered off (`PowerState` `off-blocked`, when
    /// exported), powered on (when ``powered``) once unblocked (``BlueZSimulator/setBlocked(adapter:_:)``).
    public var rfkillBlocked = false
    /// `Adapter1.PowerState` (`on`, `off`, `off-blocked`) is exported, as bluetoothd 5.66 does only
    /// with `Experimental = true` in main.conf (or `-E`); false, as by default: the real-BlueZ
    /// lane's differential check compares the two.
    public var powerState = false

    public init(
        name: String, address: BluetoothAddress, alias: String? = nil, powered: Bool = true,
        startDiscoveryFailures: Int = 0,
        advertisingInstances: Int = 5, secondaryChannels: [String] = []
    ) {
        self.secondaryChannels = secondaryChannels
        self.name = name
        self.address = address
        self.alias = alias ?? "gattway-sim"
        self.powered = powered
        self.startDiscoveryFailures = startDiscoveryFailures
        self.advertisingInstances = advertisingInstances
    }

    static func read(_ reader: JSONReader) throws -> AdapterSpec {
        try reader.readObject { object in
            let nameReader = try object.required("name")
            let name = try nameReader.string()
            guard name.hasPrefix("hci"), Int(name.dropFirst(3)) != nil else {
                throw nameReader.fail("expected an adapter name such as hci0, got \"\(name)\"")
            }
            let address = try readAddress(try object.required("address"))
            let alias = try object.optional("alias")?.string()
            let powered = try object.optional("powered")?.bool() ?? true
            let present = try object.optional("present")?.bool() ?? true
            let blocked = try object.optional("rfkill_blocked")?.bool() ?? false
            let powerState = try object.optional("power_state")?.bool() ?? false
            let failures = try object.optional("start_discovery_failures")?.integer(in: 0...1_000_000) ?? 0
            let instances = try object.optional("advertising_instances")?.integer(in: 0...255) ?? 5
            var channels: [String] = []
            if let list = object.optional("secondary_channels") {
                for item in try list.array() {
                    let channel = try item.string()
                    guard ["1M", "2M", "Coded"].contains(channel) else {
                        throw item.fail("expected \"1M\", \"2M\" or \"Coded\", got \"\(channel)\"")
                    }
                    channels.append(channel)
                }
            }
            var spec = AdapterSpec(
                name: name, address: address, alias: alias, powered: powered, startDiscoveryFailures: failures,
                advertisingInstances: instances, secondaryChannels: channels)
            spec.present = present
            spec.rfkillBlocked = blocked
            spec.powerState = powerState
            return spec
        }
    }
}

/// Two adapters in radio range of each other (`links[]`).
public struct LinkSpec: Sendable, Equatable {
    public var adapters: (String, String)
    /// RSSI in dBm each side reports for the other's advertisements.
    public var rssi: Double
    /// How often a registered advertisement is reported to the other side (seconds).
    public var interval: Double
    /// Whether a connectable advertisement goes on after a central that connected to it has
    /// disconnected (true: it never stops). False models a controller that stops advertising
    /// when a central connects and a kernel that does not start it again: the advertisement
    /// is reported again only once registered anew (`resume_advertising`).
    public var resumesAdvertising: Bool

    public init(
        _ first: String, _ second: String, rssi: Double = -50, interval: Double = 0.1, resumesAdvertising: Bool = true
    ) {
        adapters = (first, second)
        self.rssi = rssi
        self.interval = interval
        self.resumesAdvertising = resumesAdvertising
    }

    public static func == (lhs: LinkSpec, rhs: LinkSpec) -> Bool {
        lhs.adapters == rhs.adapters && lhs.rssi == rhs.rssi && lhs.interval == rhs.interval
            && lhs.resumesAdvertising == rhs.resumesAdvertising
    }

    /// The other adapter of the link, if `name` is one of its two.
    public func peer(of name: String) -> String? {
        if adapters.0 == name { return adapters.1 }
        if adapters.1 == name { return adapters.0 }
        return nil
    }

    static func read(_ reader: JSONReader, adapters known: Set<String>) throws -> LinkSpec {
        try reader.readObject { object in
            let listReader = try object.required("adapters")
            let names = try listReader.array().map { item in
                let name = try item.string()
                guard known.contains(name) else { throw item.fail("no adapter named \"\(name)\" in \"adapters\"") }
                return name
            }
            guard names.count == 2, names[0] != names[1] else {
                throw listReader.fail("expected two different adapter names, e.g. [\"hci0\", \"hci1\"]")
            }
            let rssi = Double(try object.optional("rssi")?.integer(in: -127...20) ?? -50)
            let interval = try object.optional("interval")?.duration() ?? 0.1
            guard interval > 0 else { throw try object.required("interval").fail("must be more than 0") }
            let resumes = try object.optional("resume_advertising")?.bool() ?? true
            return LinkSpec(names[0], names[1], rssi: rssi, interval: interval, resumesAdvertising: resumes)
        }
    }
}

extension JSONReader {
    /// Reads an object with `body`, then refuses the keys `body` did not read (a typo is an
    /// error, never ignored).
    func readObject<T>(_ body: (JSONObjectReader) throws -> T) throws -> T {
        let members = try self.object()
        let value = try body(members)
        try members.finish()
        return value
    }
}

func readAddress(_ reader: JSONReader) throws -> BluetoothAddress {
    let text = try reader.string()
    guard let address = BluetoothAddress(text) else {
        throw reader.fail("\"\(text)\" is not a Bluetooth address (expected six hex octets, e.g. A4:C1:38:0B:12:34)")
    }
    return address
}

func readUUID(_ reader: JSONReader) throws -> BluetoothUUID {
    let text = try reader.string()
    guard let uuid = BluetoothUUID(text) else {
        throw reader.fail(
            "\"\(text)\" is not a Bluetooth UUID (expected e.g. 180F or 0000180f-0000-1000-8000-00805f9b34fb)")
    }
    return uuid
}

/// A remote device near an adapter.
public struct DeviceSpec: Sendable, Equatable {
    public var address: BluetoothAddress
    public var addressType: BluetoothAddress.AddressType
    public var adapter: String
    public var name: String?
    /// Mean RSSI in dBm and the half-width of its uniform jitter.
    public var rssi: Double
    public var rssiJitter: Double
    /// Advertising interval in seconds (advInterval); 0 means the device does not advertise.
    /// Unless ``aligned``, each event comes 0–``maxAdvertisingDelay`` later (advDelay), so
    /// reports are on average `interval` + 5 ms apart.
    public var interval: Double
    public var connectable: Bool
    /// Carries the LE General Discoverable flag (beacons often do not: an unfiltered scan ignores them).
    public var discoverable: Bool
    public var txPower: Int?
    public var appearance: UInt16?
    /// Advertised service UUIDs (what a discovery UUID filter matches).
    public var serviceUUIDs: [BluetoothUUID]
    public var manufacturerData: [(companyID: UInt16, payload: PayloadSpec)]
    public var serviceData: [(uuid: BluetoothUUID, payload: PayloadSpec)]
    public var services: [ServiceSpec]
    public var faults: FaultSpec
    /// Goes on advertising while a central is connected (false: silent from the link coming up
    /// until it ends, as most peripherals with a single connection are).
    public var advertisesWhileConnected: Bool = true
    /// How the peripheral answers `Device1.Pair()`.
    public var pairing: Pairing = .justWorks
    /// The passkey the peripheral shows (passkey entry) or both sides compare (numeric
    /// comparison), 0–999999.
    public var pairingPasskey: UInt32 = 123_456
    /// Advertises on the wall clock's slots of its interval (slot k at k × interval since the
    /// epoch), without advDelay, its payload generators at slot k's values (modulo 256
    /// advertisements): several simulators of one machine then "hear" the same advertisement at
    /// the same time with the same counters, as gateways of a fleet hear one device, and aligned
    /// devices of one interval advertise together. Otherwise a device starts at a random phase
    /// of its interval (from the scenario's seed) and every event gets advDelay.
    public var aligned = false
    /// `irk`: the device's Identity Resolving Key (16 bytes, most significant first): it
    /// advertises from resolvable private addresses made from it (a phone, a watch).
    public var irk: [UInt8]?
    /// `rpa_rotation`: with ``irk``, a new resolvable private address every this many seconds.
    public var rpaRotation: Double?
    /// With ``irk``: how many addresses the device had before this one.
    public var rpaIndex: UInt32 = 0

    /// The resolvable private address number `index` of the device of `irk`: `prand` (top bits
    /// 01, 22 bits from the IRK and the index) and `hash = ah(irk, prand)` (Core spec Vol 6
    /// Part B 1.3.2.2). Nil only when libcrypto fails.
    public static func resolvablePrivateAddress(irk: [UInt8], index: UInt32) -> BluetoothAddress? {
        guard let cipher = AESBlockCipher(key: irk) else { return nil }
        let seed = UInt32(irk[0]) << 16 | UInt32(irk[1]) << 8 | UInt32(irk[2])
        return RandomAddressHash.address(cipher, random: seed &+ index &* 0x9E37_79B1)
    }

    /// The upper end of advDelay, the pseudo-random 0–10 ms a controller adds to advInterval
    /// before each advertising event (Core spec Vol 6 Part B 4.4.2.2.1); its mean is half of it.
    public static let maxAdvertisingDelay = 0.010

    /// What the peripheral does when a central pairs with it.
    public enum Pairing: String, Sendable, Equatable {
        /// LE Just Works pairing (no agent needed), with bonding.
        case justWorks = "just_works"
        /// The peer refuses (SMP Pairing Failed): bluetoothd answers `AuthenticationFailed`.
        case reject
        /// The peer shows a passkey (DisplayOnly, MITM required): bluetoothd asks the agent
        /// `RequestPasskey`; the right passkey pairs, anything else fails.
        case passkeyEntry = "passkey_entry"
        /// Both sides show a number (DisplayYesNo, MITM required, LE Secure Connections):
        /// bluetoothd asks the agent `RequestConfirmation`; accepted pairs.
        case numericComparison = "numeric_comparison"
    }

    public static func == (lhs: DeviceSpec, rhs: DeviceSpec) -> Bool {
        lhs.address == rhs.address && lhs.adapter == rhs.adapter && lhs.name == rhs.name
            && lhs.serviceUUIDs == rhs.serviceUUIDs && lhs.services == rhs.services && lhs.faults == rhs.faults
            && lhs.advertisesWhileConnected == rhs.advertisesWhileConnected && lhs.pairing == rhs.pairing
            && lhs.pairingPasskey == rhs.pairingPasskey
            && lhs.aligned == rhs.aligned
            && lhs.manufacturerData.map(\.companyID) == rhs.manufacturerData.map(\.companyID)
            && lhs.manufacturerData.map(\.payload) == rhs.manufacturerData.map(\.payload)
            && lhs.serviceData.map(\.uuid) == rhs.serviceData.map(\.uuid)
            && lhs.serviceData.map(\.payload) == rhs.serviceData.map(\.payload)
    }

    /// Reads one device object (as in a scenario's `devices[]`, or the control interface's `AddDevice`).
    public static func parse(_ json: some Collection<UInt8>, adapters: Set<String>, defaultAdapter: String) throws
        -> DeviceSpec
    {
        try read(try JSONReader.parse(json), adapters: adapters, defaultAdapter: defaultAdapter)
    }

    static func read(_ reader: JSONReader, adapters: Set<String>, defaultAdapter: String) throws -> DeviceSpec {
        try reader.readObject { object in
            var irk: [UInt8]?
            var rotation: Double?
            if let irkReader = object.optional("irk") {
                let text = try irkReader.string()
                let bytes = hexBytes(text)
                guard let bytes, bytes.count == 16 else {
                    throw irkReader.fail("expected 32 hex digits (the 16-byte IRK, most significant byte first)")
                }
                irk = bytes
                rotation = try object.optional("rpa_rotation")?.duration() ?? 900
                guard let rotation, rotation >= 1 else {
                    throw try object.required("rpa_rotation").fail("expected a period of at least 1 s, e.g. \"30s\"")
                }
            } else if let rotationReader = object.optional("rpa_rotation") {
                throw rotationReader.fail("needs \"irk\": the key the addresses are made from")
            }
            let address: BluetoothAddress
            if let irk {
                if let given = object.optional("address") {
                    throw given.fail("a device with \"irk\" takes its addresses from it: leave \"address\" out")
                }
                guard let first = resolvablePrivateAddress(irk: irk, index: 0) else {
                    throw reader.fail("libcrypto could not make an address from the IRK")
                }
                address = first
            } else {
                address = try readAddress(try object.required("address"))
            }
            var addressType = irk == nil ? BluetoothAddress.AddressType.public : .random
            if let typeReader = object.optional("address_type"), irk == nil {
                let text = try typeReader.string()
                guard let type = BluetoothAddress.AddressType(rawValue: text) else {
                    throw typeReader.fail("expected \"public\" or \"random\", got \"\(text)\"")
                }
                addressType = type
            }
            var adapter = defaultAdapter
            if let adapterReader = object.optional("adapter") {
                adapter = try adapterReader.string()
                guard adapters.contains(adapter) else {
                    throw adapterReader.fail("no adapter named \"\(adapter)\" in \"adapters\"")
                }
            }
            let name = try object.optional("name")?.string()
            let rssi = Double(try object.optional("rssi")?.integer(in: -127...20) ?? -60)
            let jitter = try object.optional("rssi_jitter")?.number() ?? 0
            let interval = try object.optional("interval")?.duration() ?? 1
            let connectable = try object.optional("connectable")?.bool() ?? true
            let discoverable = try object.optional("discoverable")?.bool() ?? true
            let advertisesWhileConnected = try object.optional("advertises_while_connected")?.bool() ?? true
            let aligned = try object.optional("aligned")?.bool() ?? false
            let txPower = try object.optional("tx_power")?.integer(in: -127...20)
            let appearance = try object.optional("appearance").map { UInt16(try $0.integer(in: 0...0xFFFF)) }
            let serviceUUIDs = try object.optional("service_uuids")?.array().map(readUUID) ?? []
            var manufacturerData: [(UInt16, PayloadSpec)] = []
            for (key, value) in try object.optional("manufacturer_data")?.object().entries() ?? [] {
                let id: UInt16? = key.lowercased().hasPrefix("0x") ? UInt16(key.dropFirst(2), radix: 16) : UInt16(key)
                guard let id else {
                    throw value.fail("the key is not a company id (expected a number such as 1177 or 0x0499)")
                }
                manufacturerData.append((id, try PayloadSpec.read(value)))
            }
            var serviceData: [(BluetoothUUID, PayloadSpec)] = []
            for (key, value) in try object.optional("service_data")?.object().entries() ?? [] {
                guard let uuid = BluetoothUUID(key) else {
                    throw value.fail("the key is not a Bluetooth UUID (expected e.g. FCD2)")
                }
                serviceData.append((uuid, try PayloadSpec.read(value)))
            }
            let services = try object.optional("gatt")?.array().map(ServiceSpec.read) ?? []
            let faults = try object.optional("faults").map(FaultSpec.read) ?? FaultSpec()
            var pairing = Pairing.justWorks
            if let pairingReader = object.optional("pairing") {
                let text = try pairingReader.string()
                guard let mode = Pairing(rawValue: text) else {
                    throw pairingReader.fail(
                        "expected \"just_works\", \"reject\", \"passkey_entry\" or \"numeric_comparison\", got \"\(text)\""
                    )
                }
                pairing = mode
            }
            let passkey = try object.optional("passkey").map { try UInt32($0.integer(in: 0...999_999)) }
            var spec = DeviceSpec(
                address: address, addressType: addressType, adapter: adapter, name: name, rssi: rssi,
                rssiJitter: jitter, interval: interval, connectable: connectable, discoverable: discoverable,
                txPower: txPower, appearance: appearance, serviceUUIDs: serviceUUIDs,
                manufacturerData: manufacturerData.map { (companyID: $0.0, payload: $0.1) },
                serviceData: serviceData.map { (uuid: $0.0, payload: $0.1) }, services: services, faults: faults,
                advertisesWhileConnected: advertisesWhileConnected)
            spec.pairing = pairing
            if let passkey { spec.pairingPasskey = passkey }
            spec.aligned = aligned
            spec.irk = irk
            spec.rpaRotation = rotation
            return spec
        }
    }
}

/// A primary GATT service of a device.
public struct ServiceSpec: Sendable, Equatable {
    public var uuid: BluetoothUUID
    public var characteristics: [CharacteristicSpec]

    public init(uuid: BluetoothUUID, characteristics: [CharacteristicSpec]) {
        self.uuid = uuid
        self.characteristics = characteristics
    }

    static func read(_ reader: JSONReader) throws -> ServiceSpec {
        try reader.readObject { object in
            let uuid = try readUUID(try object.required("uuid"))
            let characteristics = try object.optional("characteristics")?.array().map(CharacteristicSpec.read) ?? []
            return ServiceSpec(uuid: uuid, characteristics: characteristics)
        }
    }
}

/// A characteristic with its flags, initial value, notification generator and write behaviour.
public struct CharacteristicSpec: Sendable, Equatable {
    /// The flag strings BlueZ uses on `GattCharacteristic1.Flags`.
    public static let knownFlags: Set<String> = [
        "broadcast", "read", "write-without-response", "write", "notify", "indicate",
        "authenticated-signed-writes", "extended-properties", "reliable-write", "writable-auxiliaries",
        "encrypt-read", "encrypt-write", "encrypt-authenticated-read", "encrypt-authenticated-write",
    ]

    public var uuid: BluetoothUUID
    public var flags: [String]
    public var value: PayloadSpec
    /// Emit a notification every `notifyInterval` seconds while someone is subscribed (nil: never
    /// on its own; bursts come from the control interface).
    public var notifyInterval: Double?
    /// Values of notifications; defaults to `value`.
    public var notifyValue: PayloadSpec?
    /// Writes are copied into this characteristic of the same device (a lamp's state, say).
    public var reflectWritesTo: BluetoothUUID?
    /// ATT error code returned to reads (e.g. 2 Read Not Permitted), for fault tests.
    public var readError: UInt8?
    /// ATT error code returned to writes.
    public var writeError: UInt8?
    /// Descriptors besides the CCCD (which BlueZ adds for notify/indicate).
    public var descriptors: [DescriptorSpec]

    public init(
        uuid: BluetoothUUID, flags: [String], value: PayloadSpec = .bytes([]), notifyInterval: Double? = nil,
        notifyValue: PayloadSpec? = nil, reflectWritesTo: BluetoothUUID? = nil, readError: UInt8? = nil,
        writeError: UInt8? = nil, descriptors: [DescriptorSpec] = []
    ) {
        self.uuid = uuid
        self.flags = flags
        self.value = value
        self.notifyInterval = notifyInterval
        self.notifyValue = notifyValue
        self.reflectWritesTo = reflectWritesTo
        self.readError = readError
        self.writeError = writeError
        self.descriptors = descriptors
    }

    static func read(_ reader: JSONReader) throws -> CharacteristicSpec {
        try reader.readObject { object in
            let uuid = try readUUID(try object.required("uuid"))
            let flagsReader = try object.required("flags")
            let flags = try flagsReader.array().map { item in
                let flag = try item.string()
                guard knownFlags.contains(flag) else {
                    throw item.fail(
                        "\"\(flag)\" is not a characteristic flag (expected one of \(knownFlags.sorted().joined(separator: ", ")))"
                    )
                }
                return flag
            }
            let value = try object.optional("value").map(PayloadSpec.read) ?? .bytes([])
            var notifyInterval: Double?
            var notifyValue: PayloadSpec?
            if let notify = object.optional("notify") {
                let spec = try notify.object()
                notifyInterval = try spec.optional("every")?.duration()
                notifyValue = try spec.optional("value").map(PayloadSpec.read)
                try spec.finish()
                guard flags.contains("notify") || flags.contains("indicate") else {
                    throw notify.fail("needs the \"notify\" or \"indicate\" flag")
                }
            }
            let reflect = try object.optional("reflect_writes_to").map(readUUID)
            let readError = try object.optional("read_error").map { UInt8(try $0.integer(in: 1...255)) }
            let writeError = try object.optional("write_error").map { UInt8(try $0.integer(in: 1...255)) }
            let descriptors = try object.optional("descriptors")?.array().map(DescriptorSpec.read) ?? []
            return CharacteristicSpec(
                uuid: uuid, flags: flags, value: value, notifyInterval: notifyInterval, notifyValue: notifyValue,
                reflectWritesTo: reflect, readError: readError, writeError: writeError, descriptors: descriptors)
        }
    }
}

/// A characteristic descriptor with a fixed value.
public struct DescriptorSpec: Sendable, Equatable {
    public var uuid: BluetoothUUID
    public var value: [UInt8]

    public init(uuid: BluetoothUUID, value: [UInt8]) {
        self.uuid = uuid
        self.value = value
    }

    static func read(_ reader: JSONReader) throws -> DescriptorSpec {
        try reader.readObject { object in
            let uuid = try readUUID(try object.required("uuid"))
            var value: [UInt8] = []
            if let payload = try object.optional("value").map(PayloadSpec.read) {
                guard case .bytes(let bytes) = payload else {
                    throw try object.required("value").fail("descriptor values are fixed: use \"hex\" or \"utf8\"")
                }
                value = bytes
            }
            return DescriptorSpec(uuid: uuid, value: value)
        }
    }
}

/// Fault knobs of a device.
public struct FaultSpec: Sendable, Equatable {
    /// The first N Connect() calls fail with `org.bluez.Error.Failed` "le-connection-abort-by-local".
    public var connectFailures: Int = 0
    /// Seconds from Connect() until the link is up (and then until services resolve).
    public var connectDelay: Double = 0.05
    /// The peer drops the link this many seconds after each connection (nil: never).
    public var linkDropAfter: Double?
    /// Out of range: Connect() fails after the kernel's 20 s create-connection timeout (scaled by `connect_timeout`).
    public var unreachable: Bool = false
    /// The create-connection timeout used when `unreachable` (real BlueZ: 20 s).
    public var connectTimeout: Double = 20

    public init() {}

    static func read(_ reader: JSONReader) throws -> FaultSpec {
        try reader.readObject { object in
            var faults = FaultSpec()
            faults.connectFailures = try object.optional("connect_failures")?.integer(in: 0...1_000_000) ?? 0
            faults.connectDelay = try object.optional("connect_delay")?.duration() ?? faults.connectDelay
            faults.linkDropAfter = try object.optional("link_drop_after")?.duration()
            faults.unreachable = try object.optional("unreachable")?.bool() ?? false
            faults.connectTimeout = try object.optional("connect_timeout")?.duration() ?? 20
            return faults
        }
    }
}

/// Something that happens at a fixed time after the simulator starts.
public struct TimedEvent: Sendable, Equatable {
    public enum Action: Sendable, Equatable {
        /// Power an adapter off or on.
        case power(adapter: String, on: Bool)
        /// The daemon exits like a crash: the bus name goes, no InterfacesRemoved; with
        /// `restartAfter` it comes back that many seconds later with a fresh object tree.
        case crash(restartAfter: Double?)
    }

    public var at: Double
    public var action: Action

    static func read(_ reader: JSONReader, adapters: Set<String>) throws -> TimedEvent {
        try reader.readObject { object in
            let at = try object.required("at").duration()
            let action: Action
            if let crash = object.optional("crash") {
                guard try crash.bool() else { throw crash.fail("only true makes sense here") }
                action = .crash(restartAfter: try object.optional("restart_after")?.duration())
            } else if let powered = object.optional("powered") {
                let adapterReader = try object.required("adapter")
                let adapter = try adapterReader.string()
                guard adapters.contains(adapter) else { throw adapterReader.fail("no adapter named \"\(adapter)\"") }
                action = .power(adapter: adapter, on: try powered.bool())
            } else {
                throw reader.fail("expected an event with \"powered\" (and \"adapter\") or \"crash\"")
            }
            return TimedEvent(at: at, action: action)
        }
    }
}

/// BlueZ's own timings. The defaults are what real bluetoothd 5.66 does (measured in the
/// realbluez VM); tests scale them down with `"timing": {...}`.
public struct TimingSpec: Sendable, Equatable {
    /// `Device1.Disconnect()`: BlueZ's fixed disconnect timer before the link drops (2 s).
    public var disconnectDelay: Double = 2
    /// A temporary device is removed this long after its last advertisement (30 s).
    public var temporaryTimeout: Double = 30
    /// From the Connect() reply to `ServicesResolved=true` (≈0.1 s in the VM).
    public var resolveDelay: Double = 0.1
    /// Round trip of a GATT read or write request (≈20 ms in the VM); 0 answers at once.
    public var gattLatency: Double = 0.02
    /// The negotiated ATT MTU while connected (BlueZ asks for 517).
    public var mtu: UInt16 = 517
    /// Whether characteristics export the `MTU` property (false: as bluetoothd before 5.62,
    /// where a client does not know the MTU).
    public var mtuProperty = true
    /// The link layer's connection interval (s): 0 (the default) is no link model — commands
    /// arrive at once and requests take ``gattLatency``. Above 0, ATT PDUs go over the air in
    /// connection events this far apart, at most ``packetsPerEvent`` per event (docs/simulator.md
    /// "The link's throughput").
    public var connectionInterval: Double = 0
    /// ATT PDUs (one LL packet each) the link carries per connection event.
    public var packetsPerEvent = 4

    public init() {}

    static func read(_ reader: JSONReader) throws -> TimingSpec {
        try reader.readObject { object in
            var timing = TimingSpec()
            timing.disconnectDelay = try object.optional("disconnect_delay")?.duration() ?? timing.disconnectDelay
            timing.temporaryTimeout = try object.optional("temporary_timeout")?.duration() ?? timing.temporaryTimeout
            timing.resolveDelay = try object.optional("resolve_delay")?.duration() ?? timing.resolveDelay
            timing.gattLatency = try object.optional("gatt_latency")?.duration() ?? timing.gattLatency
            timing.mtu = UInt16(try object.optional("mtu")?.integer(in: 23...517) ?? 517)
            timing.mtuProperty = try object.optional("mtu_property")?.bool() ?? timing.mtuProperty
            if let interval = object.optional("connection_interval") {
                let seconds = try interval.duration()
                // The Core specification's range: 7.5 ms to 4 s (0: no link model).
                guard seconds == 0 || (0.0075...4).contains(seconds) else {
                    throw interval.fail("expected 0 or a connection interval from 7.5ms to 4s")
                }
                timing.connectionInterval = seconds
            }
            timing.packetsPerEvent = try object.optional("packets_per_event")?.integer(in: 1...100) ?? 4
            return timing
        }
    }
}

/// A scenario file problem: the JSON path and what was expected.
public typealias ScenarioError = JSONPathError

/// Hex digits (separators ` `, `:`, `-` allowed) as bytes; nil when not hex or odd.
func hexBytes(_ text: String) -> [UInt8]? {
    let digits = text.filter { $0 != " " && $0 != ":" && $0 != "-" }
    guard digits.count % 2 == 0, digits.allSatisfy(\.isHexDigit) else { return nil }
    var bytes: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        guard let byte = UInt8(digits[index..<next], radix: 16) else { return nil }
        bytes.append(byte)
        index = next
    }
    return bytes
}
