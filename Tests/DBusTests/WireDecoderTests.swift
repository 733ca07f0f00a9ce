import DBus
import Testing

/// The wire-format decoder against libdbus's iterator: the same values for every shape of body.
@Suite("Decoding from the wire format (no bus)")
struct WireDecoderTests {
    /// A seeded generator of well-typed values: every type but `h`, nested containers, empty ones.
    struct Values {
        var state: UInt64

        mutating func next(_ bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15  // SplitMix64
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }

        mutating func basicType() -> DBusType {
            [
                .byte, .boolean, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double, .string, .objectPath,
                .signature,
            ][next(12)]
        }

        mutating func type(depth: Int) -> DBusType {
            guard depth < 4 else { return basicType() }
            switch next(8) {
            case 0: return .variant
            case 1: return .array(type(depth: depth + 1))
            case 2: return .dictionary(key: basicType(), value: type(depth: depth + 1))
            case 3: return .structure((0..<(1 + next(3))).map { _ in type(depth: depth + 1) })
            default: return basicType()
            }
        }

        mutating func text() -> String {
            let pieces = [
                "a", "RSSI", "org.bluez.Device1", "0000181a-0000-1000-8000-00805f9b34fb", "é", "\u{1F600}", " ", "",
            ]
            return (0..<next(4)).map { _ in pieces[next(pieces.count)] }.joined()
        }

        mutating func value(_ type: DBusType, depth: Int) -> DBusValue {
            switch type {
            case .byte: return .byte(UInt8(next(256)))
            case .boolean: return .boolean(next(2) == 1)
            case .int16: return .int16(Int16(truncatingIfNeeded: next(1 << 16)))
            case .uint16: return .uint16(UInt16(next(1 << 16)))
            case .int32: return .int32(Int32(truncatingIfNeeded: next(1 << 32)))
            case .uint32: return .uint32(UInt32(next(1 << 32)))
            case .int64: return .int64(Int64(next(Int.max)) - Int64(next(Int.max)))
            case .uint64: return .uint64(UInt64(next(Int.max)) &* 3)
            case .double: return .double(Double(next(1 << 40)) / 7 - 1e9)
            case .string: return .string(text())
            case .objectPath:
                let paths: [DBusObjectPath] = ["/", "/org/bluez/hci0", "/org/bluez/hci0/dev_A4_C1_38_5A_00_00"]
                return .objectPath(paths[next(paths.count)])
            case .signature:
                let signatures: [DBusSignature] = [[], [.string], [.dictionary(key: .string, value: .variant)]]
                return .signature(signatures[next(signatures.count)])
            case .unixFD: return .byte(0)
            case .variant:
                let inner = self.type(depth: depth + 1)
                return .variant(value(inner, depth: depth + 1))
            case .array(let element):
                return .array(element, (0..<next(depth < 3 ? 5 : 2)).map { _ in value(element, depth: depth + 1) })
            case .dictionary(let key, let valueType):
                let entries = (0..<next(depth < 3 ? 4 : 2)).map { _ in
                    DBusDictionaryEntry(value(key, depth: depth + 1), value(valueType, depth: depth + 1))
                }
                return .dictionary(key: key, value: valueType, entries)
            case .structure(let fields): return .structure(fields.map { value($0, depth: depth + 1) })
            }
        }
    }

    @Test("random bodies decode to the same values from the wire format as with libdbus's iterator")
    func randomBodies() throws {
        var values = Values(state: 0x6761_7474)
        for _ in 0..<1500 {
            let arguments = (0..<values.next(5)).map { _ in values.value(values.type(depth: 0), depth: 0) }
            let (wire, iterator) = try DBusMessage.decodeBothWays(wire: try DBusMessage.wire(arguments))
            #expect(wire == iterator, "\(arguments)")
            #expect(iterator == arguments, "\(arguments)")
        }
    }

    @Test("a BlueZ PropertiesChanged and a GetManagedObjects-shaped body decode the same both ways")
    func blueZShapes() throws {
        let serviceData = DBusValue.dictionary(
            key: .string, value: .variant,
            [
                DBusDictionaryEntry(
                    .string("0000181a-0000-1000-8000-00805f9b34fb"), .variant(.bytes([0xA4, 0xC1, 0x38, 1, 2])))
            ])
        let changed: [DBusValue] = [
            "org.bluez.Device1", .variantDictionary([("RSSI", .int16(-60)), ("ServiceData", serviceData)]),
            .strings([]),
        ]
        let objects: [DBusValue] = [
            .dictionary(
                key: .objectPath, value: try DBusType("a{sa{sv}}"),
                [
                    DBusDictionaryEntry(
                        .objectPath("/org/bluez/hci0/dev_A4_C1_38_5A_00_00"),
                        .dictionary(
                            key: .string, value: try DBusType("a{sv}"),
                            [DBusDictionaryEntry("org.bluez.Device1", .variantDictionary(["RSSI": .int16(-60)]))])),
                    DBusDictionaryEntry(
                        .objectPath("/org/bluez/hci0"),
                        .dictionary(key: .string, value: try DBusType("a{sv}"), [])),
                ])
        ]
        for arguments in [changed, objects, [], [.array(try DBusType("a{sv}"), [])], [.bytes([])]] {
            let (wire, iterator) = try DBusMessage.decodeBothWays(wire: try DBusMessage.wire(arguments))
            #expect(wire != nil)
            #expect(wire == iterator && iterator == arguments, "\(arguments)")
        }
    }
}
