import DBus

/// Well-typed ``DBusValue`` trees from fuzz bytes, depth-bounded: what a message decoded by
/// libdbus can carry (every array element of the array's type; no unix fds). For BlueZ
/// properties, the value BlueZ sends (``property(_:_:)``) most of the time, any other type the
/// rest. Strings and paths come from pools of what BlueZ sends and what it must not (addresses
/// and UUIDs in other case or not at all, empty, very long), or from the input.
public enum DBusValueGenerator {
    public static let maxDepth = 4

    public static let strings: [String] = [
        "AA:BB:CC:DD:EE:FF", "aa:bb:cc:dd:ee:ff", "A4:C1:38:00:00:10", "ZZ:ZZ:ZZ:ZZ:ZZ:ZZ", "AA:BB:CC:DD:EE", "",
        "0000180f-0000-1000-8000-00805f9b34fb", "180F", "fcd2", "0000FCD2-0000-1000-8000-00805F9B34FB", "not-a-uuid",
        "12345678-1234-5678-1234-56789abcdef0", "public", "random", "read", "notify", "write-without-response",
        "central", "peripheral", "org.bluez.Device1", "RSSI", String(repeating: "x", count: 300), "héllo\u{FFFE}",
    ]

    public static let paths: [String] = [
        "/", "/org", "/org/bluez", "/org/bluez/hci0", "/org/bluez/hci1", "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF",
        "/org/bluez/hci0/dev_A4_C1_38_00_00_10", "/org/bluez/hci0/dev_aa_bb_cc_dd_ee_ff", "/org/bluez/hci0/dev_ZZ",
        "/org/bluez/hci0/dev_", "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF_00", "/org/bluez/hci1/dev_11_22_33_44_55_66",
        "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF/service000a",
        "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF/service000a/char000b",
        "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF/service000a/char000b/desc000c",
        "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF/dev_11_22_33_44_55_66", "/org/bluez/dev_AA_BB_CC_DD_EE_FF",
        "/org/bluez/hci0/" + String(repeating: "a", count: 200),
        "/org/bluez/hci0" + String(repeating: "/d", count: 40),
    ]

    public static func string(_ input: inout FuzzInput) -> String {
        let choice = input.index(strings.count + 1)
        return choice < strings.count ? strings[choice] : input.string(limit: 40)
    }

    /// A valid object path: from the pool, or the pool's entry with a level made of input bytes.
    public static func path(_ input: inout FuzzInput) -> DBusObjectPath {
        let choice = input.index(paths.count + 1)
        if choice < paths.count { return DBusObjectPath(rawValue: paths[choice]) ?? .root }
        let allowed = Array("ABCDEFabcdef0123456789_Zdev".utf8)
        let level = input.chunk(limit: 24).map { allowed[Int($0) % allowed.count] }
        let text = "/org/bluez/hci0/dev_" + String(decoding: level, as: UTF8.self)
        return DBusObjectPath(rawValue: text) ?? .root
    }

    public static func basicType(_ input: inout FuzzInput) -> DBusType {
        [
            .byte, .boolean, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double, .string, .objectPath,
            .signature,
        ][
            Int(input.byte() % 12)]
    }

    public static func type(_ input: inout FuzzInput, depth: Int) -> DBusType {
        let code = input.byte() % (depth >= maxDepth ? 12 : 17)
        switch code {
        case 12: return .variant
        case 13: return .array(type(&input, depth: depth + 1))
        case 14: return .dictionary(key: basicType(&input), value: type(&input, depth: depth + 1))
        case 15: return .structure((0...(input.byte() % 3)).map { _ in type(&input, depth: depth + 1) })
        case 16: return .array(.byte)
        default:
            return [
                .byte, .boolean, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double, .string, .objectPath,
                .signature,
            ][Int(code)]
        }
    }

    /// How many elements a container gets: mostly a few, sometimes many (bytes: up to 70,000).
    public static func count(_ input: inout FuzzInput, bytes: Bool) -> Int {
        let choice = input.byte()
        switch choice {
        case 0xF0...0xF7: return bytes ? 300 : 40
        case 0xF8...0xFD: return bytes ? 5000 : 200
        case 0xFE...0xFF: return bytes ? 70_000 : 1000
        default: return Int(choice % 8)
        }
    }

    public static func value(_ type: DBusType, _ input: inout FuzzInput, depth: Int) -> DBusValue {
        switch type {
        case .byte: return .byte(input.byte())
        case .boolean: return .boolean(input.bool())
        case .int16: return .int16(Int16(bitPattern: input.uint16()))
        case .uint16: return .uint16(input.uint16())
        case .int32: return .int32(Int32(bitPattern: input.uint32()))
        case .uint32: return .uint32(input.uint32())
        case .int64: return .int64(Int64(bitPattern: input.uint64()))
        case .uint64: return .uint64(input.uint64())
        case .double: return .double(Double(bitPattern: input.uint64()))
        case .string: return .string(string(&input))
        case .objectPath: return .objectPath(path(&input))
        case .signature:
            return .signature(
                DBusSignature(types: (0..<(input.byte() % 3)).map { _ in self.type(&input, depth: depth + 1) }))
        case .unixFD: return .byte(0)
        case .variant:
            let inner = depth >= maxDepth ? basicType(&input) : self.type(&input, depth: depth + 1)
            return .variant(value(inner, &input, depth: depth + 1))
        case .array(.byte):
            let count = count(&input, bytes: true)
            let pattern = input.chunk(limit: 16)
            return .bytes(
                (0..<count).map { pattern.isEmpty ? UInt8(truncatingIfNeeded: $0) : pattern[$0 % pattern.count] })
        case .array(let element):
            let count = depth >= maxDepth ? min(2, count(&input, bytes: false)) : count(&input, bytes: false)
            return .array(element, (0..<count).map { _ in value(element, &input, depth: depth + 1) })
        case .dictionary(let key, let valueType):
            let count = count(&input, bytes: false)
            return .dictionary(
                key: key, value: valueType,
                (0..<count).map { _ in
                    DBusDictionaryEntry(
                        value(key, &input, depth: depth + 1), value(valueType, &input, depth: depth + 1))
                })
        case .structure(let fields):
            return .structure(fields.map { value($0, &input, depth: depth + 1) })
        }
    }

    /// Any well-typed value.
    public static func any(_ input: inout FuzzInput, depth: Int = 0) -> DBusValue {
        value(type(&input, depth: depth), &input, depth: depth)
    }

    /// The types BlueZ gives its properties.
    public static let propertyTypes: [String: DBusType] = [
        "Address": .string, "AddressType": .string, "Name": .string, "Alias": .string, "Connected": .boolean,
        "ServicesResolved": .boolean, "Paired": .boolean, "UUIDs": .array(.string),
        "ManufacturerData": .dictionary(key: .uint16, value: .variant),
        "ServiceData": .dictionary(key: .string, value: .variant),
        "TxPower": .int16, "RSSI": .int16, "Powered": .boolean, "Roles": .array(.string), "UUID": .string,
        "Primary": .boolean,
        "Flags": .array(.string), "NotifyAcquired": .boolean, "MTU": .uint16,
    ]

    /// A property's value inside its `a{sv}` variant: of BlueZ's type with fuzzed content, or
    /// of any type.
    public static func property(_ name: String, _ input: inout FuzzInput) -> DBusValue {
        guard input.byte() % 4 != 0, let type = propertyTypes[name] else { return .variant(any(&input, depth: 1)) }
        switch name {
        case "ManufacturerData", "ServiceData":
            // Data maps: each value an `ay` in a variant (sometimes something else).
            let count = count(&input, bytes: false)
            let entries = (0..<count).map { _ in
                let key: DBusValue = name == "ManufacturerData" ? .uint16(input.uint16()) : .string(string(&input))
                let inner = input.byte() % 8 == 0 ? any(&input, depth: 2) : value(.array(.byte), &input, depth: 2)
                return DBusDictionaryEntry(key, .variant(inner))
            }
            return .variant(
                .dictionary(
                    key: type == .dictionary(key: .uint16, value: .variant) ? .uint16 : .string,
                    value: .variant, entries))
        default:
            return .variant(value(type, &input, depth: 1))
        }
    }

    public static let propertyNames: [String] = Array(propertyTypes.keys).sorted() + ["Icon", "Class", ""]

    public static func propertyName(_ input: inout FuzzInput) -> String {
        let choice = input.index(propertyNames.count + 1)
        return choice < propertyNames.count ? propertyNames[choice] : input.string(limit: 20)
    }

    /// An `a{sv}` of properties.
    public static func properties(_ input: inout FuzzInput) -> DBusValue {
        let count = Int(input.byte() % 8)
        return .dictionary(
            key: .string, value: .variant,
            (0..<count).map { _ in
                let name = propertyName(&input)
                return DBusDictionaryEntry(.string(name), property(name, &input))
            })
    }

    public static let interfaces = [
        "org.bluez.Adapter1", "org.bluez.Device1", "org.bluez.GattService1", "org.bluez.GattCharacteristic1",
        "org.bluez.GattDescriptor1", "org.bluez.Battery1", "org.freedesktop.DBus.Properties",
    ]

    public static func interface(_ input: inout FuzzInput) -> String {
        let choice = input.index(interfaces.count + 1)
        return choice < interfaces.count ? interfaces[choice] : input.string(limit: 30)
    }

    /// The `a{sa{sv}}` of `InterfacesAdded` (sometimes any value).
    public static func interfaceMap(_ input: inout FuzzInput) -> DBusValue {
        if input.byte() % 10 == 0 { return any(&input, depth: 1) }
        let count = Int(input.byte() % 4)
        return .dictionary(
            key: .string, value: .dictionary(key: .string, value: .variant),
            (0..<count).map { _ in
                DBusDictionaryEntry(.string(interface(&input)), properties(&input))
            })
    }

    /// The `a{oa{sa{sv}}}` of a `GetManagedObjects` reply (sometimes any value).
    public static func managedObjects(_ input: inout FuzzInput) -> DBusValue {
        if input.byte() % 12 == 0 { return any(&input) }
        let count = Int(input.byte() % 6)
        return .dictionary(
            key: .objectPath, value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)),
            (0..<count).map { _ in DBusDictionaryEntry(.objectPath(path(&input)), interfaceMap(&input)) })
    }
}
