import Bluetooth
import JSON

/// `role` in config.json: which Bluetooth roles the gateway plays.
public enum GatewayRole: String, Sendable, CaseIterable {
    /// Scan, connect and publish readings (the default).
    case central
    /// Only the GATT server and advertising of the `peripheral` section.
    case peripheral
    /// Both, on one adapter or on two (`peripheral.adapter`).
    case both

    public var includesCentral: Bool { self != .peripheral }
    public var includesPeripheral: Bool { self != .central }
}

/// Where a peripheral value comes from: the latest message on an MQTT topic, optionally one key
/// of a JSON object (such as a gateway state topic), scaled and encoded into bytes.
public struct PeripheralValueSource: Sendable, Equatable {
    /// `from_topic`: an MQTT topic (no wildcards).
    public var topic: String
    /// `json_key`: take this member of a JSON object payload; nil: the whole payload.
    public var jsonKey: String?
    /// `encoding`: how the value becomes bytes (the command encodings of docs/config.md).
    public var encoding: ValueEncoding
    /// `scale`: numbers are multiplied by it before encoding (e.g. 100 for 0.01 °C units).
    public var scale: Double?

    public init(topic: String, jsonKey: String? = nil, encoding: ValueEncoding = .utf8, scale: Double? = nil) {
        self.topic = topic
        self.jsonKey = jsonKey
        self.encoding = encoding
        self.scale = scale
    }

    /// The bytes an MQTT payload stands for; the error says why a payload does not fit.
    public func bytes(from payload: [UInt8]) throws(CommandError) -> [UInt8] {
        let value: JSONValue
        if let jsonKey {
            guard case .object(let members)? = try? JSONValue.parse(payload) else {
                throw CommandError("expected a JSON object with \"\(jsonKey)\"")
            }
            guard let member = members.last(where: { $0.key == jsonKey })?.value, member != .null else {
                throw CommandError("the JSON object has no \"\(jsonKey)\"")
            }
            value = member
        } else {
            value = try encoding.value(fromPlainText: String(decoding: payload, as: UTF8.self))
        }
        return try Self.encode(value, encoding, scale: scale)
    }

    /// `value` multiplied by `scale` (when given; rounded for integer encodings) in `encoding`.
    static func encode(_ value: JSONValue, _ encoding: ValueEncoding, scale: Double?) throws(CommandError) -> [UInt8] {
        guard let scale else { return try encoding.encode(value) }
        guard case .number(let number) = value else {
            throw CommandError("scale needs a number, got \(ValueEncoding.describe(value))")
        }
        let scaled = number * scale
        return try encoding.encode(.number(encoding == .float32le ? scaled : scaled.rounded()))
    }

    /// Reads the source keys of `object` (`from_topic`, `json_key`, `encoding`, `scale`); nil
    /// when the object has no `from_topic`.
    init?(_ object: inout ConfigObject, defaultEncoding: ValueEncoding) {
        let topic = object.optional("from_topic") { try $0.topicName() }
        let jsonKey = object.optional("json_key") { try $0.nonEmptyString() }
        let encoding = object.read("encoding", default: defaultEncoding) { try $0.encoding() }
        let scale = object.optional("scale") { reader in
            let number = try reader.number()
            guard number != 0, number.isFinite else { throw reader.fail("expected a non-zero number") }
            return number
        }
        if scale != nil, !encoding.isNumeric {
            object.problems.add(object.childPath("scale"), "needs a numeric encoding, not \(encoding.rawValue)")
        }
        guard let topic else {
            if jsonKey != nil { object.problems.add(object.childPath("json_key"), "needs from_topic") }
            return nil
        }
        self.init(topic: topic, jsonKey: jsonKey, encoding: encoding, scale: scale)
    }
}

/// One characteristic of a `peripheral.services[]` entry.
public struct PeripheralCharacteristicSettings: Sendable, Equatable {
    public var uuid: BluetoothUUID
    /// `properties`: BlueZ flag names — read, write, write-without-response, notify, indicate,
    /// encrypt-read, encrypt-write, encrypt-authenticated-read, encrypt-authenticated-write.
    public var properties: CharacteristicProperties
    /// `value`: the value before any MQTT message arrived (in `encoding`); empty when absent.
    public var initialValue: [UInt8]
    /// `from_topic` and friends: the value follows this topic; subscribed centrals are notified.
    public var source: PeripheralValueSource?
    /// `to_topic`: writes by centrals are published here.
    public var writeTopic: String?
    /// How written bytes are shown on `to_topic` (and `value` is read): `encoding`.
    public var encoding: ValueEncoding

    static let flags: [(name: String, property: CharacteristicProperties)] = [
        ("read", .read), ("write", .write), ("write-without-response", .writeWithoutResponse),
        ("notify", .notify), ("indicate", .indicate), ("encrypt-read", .encryptRead), ("encrypt-write", .encryptWrite),
        ("encrypt-authenticated-read", .encryptAuthenticatedRead),
        ("encrypt-authenticated-write", .encryptAuthenticatedWrite),
    ]

    init?(_ reader: JSONReader, problems: ConfigProblems) {
        guard var object = ConfigObject(reader, problems) else { return nil }
        let uuid = object.required("uuid", expected: "a characteristic UUID such as \"2A6E\"") { try $0.uuid() }
        let names = Self.flags.map(\.name).joined(separator: ", ")
        properties =
            object.required("properties", expected: "a list of \(names)") { reader in
                var properties = CharacteristicProperties()
                for item in try reader.array() {
                    let name = try item.string()
                    guard let flag = Self.flags.first(where: { $0.name == name }) else {
                        throw item.fail("\"\(name)\" is not a property (expected one of \(names))")
                    }
                    properties.insert(flag.property)
                }
                guard !properties.isEmpty else { throw reader.fail("expected at least one property") }
                return properties
            } ?? []
        source = PeripheralValueSource(&object, defaultEncoding: .utf8)
        encoding = source?.encoding ?? object.read("encoding", default: .utf8) { try $0.encoding() }
        writeTopic = object.optional("to_topic") { try $0.topicName() }
        initialValue = Self.initialValue(&object, encoding: encoding, scale: source?.scale) ?? []
        object.finish()
        let readable: CharacteristicProperties = [.read, .notify, .indicate]
        let writable: CharacteristicProperties = [.write, .writeWithoutResponse]
        if source != nil, properties.isDisjoint(with: readable) {
            problems.add(object.childPath("from_topic"), "needs a read, notify or indicate property")
        }
        if writeTopic != nil, properties.isDisjoint(with: writable) {
            problems.add(object.childPath("to_topic"), "needs a write or write-without-response property")
        }
        guard let uuid else { return nil }
        self.uuid = uuid
    }
}

extension PeripheralCharacteristicSettings {
    /// `value` of `object` in `encoding` (scaled like MQTT values); nil when absent or invalid.
    static func initialValue(_ object: inout ConfigObject, encoding: ValueEncoding, scale: Double?) -> [UInt8]? {
        object.optional("value") { reader in
            do throws(CommandError) {
                return try PeripheralValueSource.encode(reader.value, encoding, scale: scale)
            } catch {
                throw reader.fail(error.message)
            }
        }
    }
}

/// One `peripheral.services[]` entry: a primary GATT service.
public struct PeripheralServiceSettings: Sendable, Equatable {
    public var uuid: BluetoothUUID
    public var characteristics: [PeripheralCharacteristicSettings]

    init?(_ reader: JSONReader, problems: ConfigProblems) {
        guard var object = ConfigObject(reader, problems) else { return nil }
        let uuid = object.required("uuid", expected: "a service UUID") { reader in
            let uuid = try reader.uuid()
            // BlueZ owns GAP and GATT and refuses an application that exports them.
            if uuid == BluetoothUUID(0x1800) || uuid == BluetoothUUID(0x1801) {
                throw reader.fail("\(uuid.shortDescription) is provided by BlueZ itself and cannot be served")
            }
            return uuid
        }
        characteristics =
            object.required("characteristics", expected: "a list of characteristics") { reader in
                let items = try reader.array()
                guard !items.isEmpty else { throw reader.fail("expected at least one characteristic") }
                return items.compactMap { PeripheralCharacteristicSettings($0, problems: problems) }
            } ?? []
        object.finish()
        guard let uuid else { return nil }
        self.uuid = uuid
    }
}

/// A piece of advertising data whose bytes are fixed (`value`) or follow an MQTT topic.
public struct PeripheralAdvertisedData: Sendable, Equatable {
    /// `value` (in `encoding`): the bytes before any MQTT message arrived.
    public var initialValue: [UInt8]
    public var source: PeripheralValueSource?

    init(_ object: inout ConfigObject) {
        source = PeripheralValueSource(&object, defaultEncoding: .hex)
        let encoding = source?.encoding ?? object.read("encoding", default: .hex) { try $0.encoding() }
        let value = PeripheralCharacteristicSettings.initialValue(&object, encoding: encoding, scale: source?.scale)
        if source == nil, value == nil { object.problems.add(object.path, "needs a value or a from_topic") }
        initialValue = value ?? []
    }
}

/// `peripheral.advertising`: what the gateway advertises while it serves.
public struct PeripheralAdvertisingSettings: Sendable, Equatable {
    public var enabled = true
    /// Connectable (`true`, LE advertisement type "peripheral") or broadcast only.
    public var connectable = true
    public var localName: String?
    /// `service_uuids`: nil means the UUIDs of the served services.
    public var serviceUUIDs: [BluetoothUUID]?
    /// `solicit_uuids`: services the gateway asks a central to offer.
    public var solicitUUIDs: [BluetoothUUID] = []
    /// `manufacturer_data`: company id → data.
    public var manufacturerData: [(companyID: UInt16, data: PeripheralAdvertisedData)] = []
    /// `service_data`: service UUID → data.
    public var serviceData: [(uuid: BluetoothUUID, data: PeripheralAdvertisedData)] = []
    /// `tx_power`: include the TX power level (dBm) in the advertisement.
    public var txPower: Int?
    /// `appearance`: GAP appearance value.
    public var appearance: Int?

    public init() {}

    init(_ object: inout ConfigObject) {
        let problems = object.problems
        enabled = object.read("enabled", default: enabled) { try $0.bool() }
        connectable = object.read("connectable", default: connectable) { try $0.bool() }
        localName = object.optional("local_name") { try $0.nonEmptyString() }
        serviceUUIDs = object.optional("service_uuids") { reader in
            try reader.array().compactMap { item in problems.attempt { try item.uuid() } }
        }
        solicitUUIDs = object.read("solicit_uuids", default: []) { reader in
            try reader.array().compactMap { item in problems.attempt { try item.uuid() } }
        }
        manufacturerData = object.read("manufacturer_data", default: []) { reader in
            try reader.array().compactMap { item -> (UInt16, PeripheralAdvertisedData)? in
                guard var entry = ConfigObject(item, problems) else { return nil }
                let company = entry.required("company_id", expected: "a company identifier 0…65535") {
                    try $0.integer(in: 0...0xFFFF)
                }
                let data = PeripheralAdvertisedData(&entry)
                entry.finish()
                return company.map { (UInt16($0), data) }
            }
        }
        serviceData = object.read("service_data", default: []) { reader in
            try reader.array().compactMap { item -> (BluetoothUUID, PeripheralAdvertisedData)? in
                guard var entry = ConfigObject(item, problems) else { return nil }
                let uuid = entry.required("uuid", expected: "a service UUID such as \"FCD2\"") { try $0.uuid() }
                let data = PeripheralAdvertisedData(&entry)
                entry.finish()
                return uuid.map { ($0, data) }
            }
        }
        txPower = object.optional("tx_power") { try $0.integer(in: -127...20) }
        appearance = object.optional("appearance") { try $0.integer(in: 0...0xFFFF) }
        object.finish()
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.enabled == rhs.enabled && lhs.connectable == rhs.connectable && lhs.localName == rhs.localName
            && lhs.serviceUUIDs == rhs.serviceUUIDs && lhs.solicitUUIDs == rhs.solicitUUIDs
            && lhs.txPower == rhs.txPower && lhs.appearance == rhs.appearance
            && lhs.manufacturerData.map(\.companyID) == rhs.manufacturerData.map(\.companyID)
            && lhs.manufacturerData.map(\.data) == rhs.manufacturerData.map(\.data)
            && lhs.serviceData.map(\.uuid) == rhs.serviceData.map(\.uuid)
            && lhs.serviceData.map(\.data) == rhs.serviceData.map(\.data)
    }
}

/// `peripheral` in config.json: the GATT server and advertisement of the peripheral role, bridged
/// to MQTT (docs/config.md, docs/peripheral.md).
public struct PeripheralSettings: Sendable, Equatable {
    /// The adapter that serves and advertises; nil: `bluetooth.adapter`.
    public var adapter: String?
    public var services: [PeripheralServiceSettings] = []
    public var advertising = PeripheralAdvertisingSettings()

    public init() {}

    init(_ object: inout ConfigObject) {
        let problems = object.problems
        adapter = object.optional("adapter") { try $0.adapterName() }
        services = object.read("services", default: []) { reader in
            try reader.array().compactMap { PeripheralServiceSettings($0, problems: problems) }
        }
        if let value = object.value("advertising"), var section = ConfigObject(value, problems) {
            advertising = PeripheralAdvertisingSettings(&section)
        }
        object.finish()
    }

    /// Every topic a value follows, in config order (characteristics, then advertising data).
    public var sourceTopics: [String] {
        var topics: [String] = []
        for service in services {
            for characteristic in service.characteristics {
                if let topic = characteristic.source?.topic, !topics.contains(topic) { topics.append(topic) }
            }
        }
        for source in advertising.manufacturerData.compactMap(\.data.source)
            + advertising.serviceData.compactMap(\.data.source)
        where !topics.contains(source.topic) {
            topics.append(source.topic)
        }
        return topics
    }
}
