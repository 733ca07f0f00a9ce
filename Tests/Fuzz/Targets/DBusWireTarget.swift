import DBus

extension FuzzTargets {
    /// The bytes of a D-Bus message as they come off the bus — from bluetoothd, or from whatever
    /// else can send to the gateway's connection — decoded the two ways the gateway can decode a
    /// received message: from the wire format (`WireDecoder`, the fast path) and by libdbus's
    /// iterator (the fallback). See ``DBusWireFuzz``.
    static let dbusWire = FuzzTarget(
        name: "dbus-wire",
        summary: "received D-Bus messages decoded from the wire format and by libdbus's iterator: both must agree",
        seeds: { DBusWireFuzz.seeds },
        run: { DBusWireFuzz.run($0) })
}

/// The driver of ``FuzzTargets/dbusWire``.
///
/// Encoding: up to 6 messages, each a mode byte (bits 0–1: 0 and 1 a body of 1–3 values from
/// ``DBusValueGenerator`` — 1 with BlueZ's `PropertiesChanged` shape —, 2 the same damaged at a
/// few input-chosen bytes and perhaps cut short, 3 the message's bytes taken as they are from
/// the input) and its operands. All messages of an input share one string cache, as the
/// messages of one connection do.
///
/// Properties: no trap; a message libdbus marshalled itself is accepted again and both
/// decodings give back the values it was made of; of any message libdbus accepts, the wire
/// decoding either declines (nil: left to the iterator) or gives exactly the iterator's values,
/// and decoding it again (now with its strings in the cache) gives the same.
enum DBusWireFuzz {
    static func run(_ bytes: [UInt8]) {
        var input = FuzzInput(bytes)
        let strings = StringCache()
        var messages = 0
        while !input.isEmpty, messages < 6 {
            messages += 1
            let mode = input.byte() & 3
            var generated: [DBusValue]?
            var wire: [UInt8]
            if mode == 3 {
                wire = input.bytes(Int(input.uint16()) % 4097)
            } else {
                let values =
                    mode == 1
                    ? propertiesChanged(&input)
                    : (0..<(1 + Int(input.byte() % 3))).map { _ in
                        DBusValueGenerator.any(&input)
                    }
                guard let encoded = try? DBusMessage.wire(values) else { continue }
                wire = encoded
                if mode == 2, !wire.isEmpty {
                    for _ in 0..<(1 + input.byte() % 4) {
                        wire[Int(input.uint32()) % wire.count] = input.byte()
                    }
                    if input.bool() { wire.removeLast(Int(input.byte()) % wire.count) }
                } else {
                    generated = values
                }
            }
            check(wire, generated: generated, strings: strings)
        }
    }

    /// BlueZ's `PropertiesChanged`: an interface, an `a{sv}` of properties, invalidated names.
    static func propertiesChanged(_ input: inout FuzzInput) -> [DBusValue] {
        [
            .string(DBusValueGenerator.interface(&input)), DBusValueGenerator.properties(&input),
            .array(.string, input.bool() ? [] : [.string(DBusValueGenerator.propertyName(&input))]),
        ]
    }

    static func check(_ wire: [UInt8], generated: [DBusValue]?, strings: StringCache) {
        let decoded: (wire: [DBusValue]?, iterator: [DBusValue])
        do {
            decoded = try DBusMessage.decodeBothWays(wire: wire, strings: strings)
        } catch {
            // Refused by libdbus: only bytes that did not come from libdbus itself may be.
            fuzzProperty(generated == nil, "libdbus marshalled a message it then refused: \(error)")
            return
        }
        let iterator = decoded.iterator
        if let generated {
            fuzzProperty(same(iterator, generated), "iterator decoding changed the value: \(generated) → \(iterator)")
        }
        if let fromWire = decoded.wire {
            fuzzProperty(same(fromWire, iterator), "wire decoding \(fromWire) differs from the iterator's \(iterator)")
        }
        // Again, with this message's strings now in the cache.
        if let again = try? DBusMessage.decodeBothWays(wire: wire, strings: strings) {
            fuzzProperty(
                (again.wire == nil) == (decoded.wire == nil) && same(again.wire ?? [], decoded.wire ?? []),
                "decoding the same message twice gave \(String(describing: decoded.wire)), then \(String(describing: again.wire))"
            )
        } else {
            fuzzProperty(false, "libdbus accepted a message once, then refused it")
        }
    }

    /// Equal values; NaN doubles (never equal to themselves) compared by their spelling.
    static func same(_ a: [DBusValue], _ b: [DBusValue]) -> Bool {
        a == b || "\(a)" == "\(b)"
    }

    /// Each mode once, the raw mode with the bytes of real-looking BlueZ signals.
    static let seeds: [[UInt8]] = {
        var seeds: [[UInt8]] = []
        for mode: UInt8 in 0...2 {
            var builder = FuzzInputBuilder()
            for variant: UInt8 in 0..<3 {
                builder.byte(mode)
                if mode != 1 { builder.byte(variant) }
                builder.rest(Array(repeating: variant &* 37 &+ 5, count: 24))
            }
            seeds.append(builder.bytes)
        }
        let bodies: [[DBusValue]] = [
            [
                .string("org.bluez.Device1"),
                .dictionary(
                    key: .string, value: .variant,
                    [
                        DBusDictionaryEntry(.string("RSSI"), .variant(.int16(-61))),
                        DBusDictionaryEntry(
                            .string("ServiceData"),
                            .variant(
                                .dictionary(
                                    key: .string, value: .variant,
                                    [
                                        DBusDictionaryEntry(
                                            .string("0000181a-0000-1000-8000-00805f9b34fb"),
                                            .variant(.array(.byte, [0xA4, 0xC1, 0x38, 0x00, 0xE5].map { .byte($0) })))
                                    ]))),
                    ]),
                .array(.string, []),
            ],
            [.objectPath("/org/bluez/hci0/dev_A4_C1_38_5A_00_00"), .string("x"), .uint64(7)],
        ]
        for body in bodies {
            guard let wire = try? DBusMessage.wire(body) else { continue }
            var builder = FuzzInputBuilder()
            builder.byte(3)
            builder.uint16(UInt16(wire.count))
            builder.rest(wire)
            seeds.append(builder.bytes)
        }
        return seeds
    }()
}
