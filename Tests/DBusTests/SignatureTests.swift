import Testing

@testable import DBus

@Suite("Signatures and values (no bus)")
struct SignatureTests {
    @Test(
        "valid signatures parse and print back unchanged",
        arguments: [
            "", "y", "b", "n", "q", "i", "u", "x", "t", "d", "h", "s", "o", "g", "v", "as", "a{sv}",
            "a{oa{sa{sv}}}", "(ii)", "a(say)", "sa{sv}as", "aay", "a{s(iv)}", "((y))",
        ])
    func validSignatures(text: String) throws {
        #expect(try DBusSignature(text).description == text)
    }

    @Test(
        "invalid signatures are a typed InvalidSignature error",
        arguments: [
            "z", "a", "(", "()", "{sv}", "a{vs}", "a{s}", "a{svv}", "(i", "a{(i)s}",
            String(repeating: "a", count: 33) + "i",
            String(repeating: "s", count: 256),
        ])
    func invalidSignatures(text: String) {
        #expect {
            _ = try DBusSignature(text)
        } throws: { error in
            (error as? DBusError)?.name == .invalidSignature
        }
    }

    @Test("a value knows its type, also as an empty container")
    func valueTypes() throws {
        #expect(DBusValue.array(.string, []).type == (try DBusType("as")))
        #expect(DBusValue.variantDictionary([:]).type == (try DBusType("a{sv}")))
        #expect(DBusValue.structure([.int32(1), .string("x")]).type.description == "(is)")
        #expect(DBusValue.variant(.uint64(3)).type == .variant)
    }

    @Test("checking against the wrong type says where the mismatch is")
    func checkMismatch() throws {
        let value = DBusValue.variantDictionary(["Name": .string("x")])
        #expect(throws: Never.self) { try value.check(DBusType("a{sv}")) }
        #expect {
            try value.check(DBusType("a{ss}"))
        } throws: { error in
            guard let error = error as? DBusError else { return false }
            return error.name == .invalidArgs && error.message.contains("expected a{ss}")
        }
        let bad = DBusValue.array(.string, [.string("a"), .int32(2)])
        #expect {
            try bad.check(.array(.string))
        } throws: { error in
            (error as? DBusError)?.message.contains("[1]: expected s, got i") == true
        }
    }

    @Test(
        "object paths are validated",
        arguments: [
            ("/", true), ("/org/bluez/hci0", true), ("/a_b/C9", true), ("", false), ("org", false), ("/a/", false),
            ("//a", false), ("/a-b", false), ("/a b", false),
        ])
    func objectPaths(text: String, valid: Bool) {
        #expect((DBusObjectPath(rawValue: text) != nil) == valid)
    }

    @Test(
        "isChild(of:) agrees with parent",
        arguments: [
            "/", "/a", "/org", "/org/bluez", "/org/bluez/hci0", "/org/bluez/hci01",
            "/org/bluez/hci0/dev_A4_C1_38_00_00_01",
            "/org/bluez/hci01/dev_A4_C1_38_00_00_01", "/org/bluez/hci0/dev_A4_C1_38_00_00_01/service0010",
            "/org/bluez/hci0x/dev_A4", "/org/bluez/hci/dev_A4",
        ])
    func isChild(path: String) throws {
        let candidates = [
            "/", "/a", "/org", "/org/bluez", "/org/bluez/hci0", "/org/bluez/hci01",
            "/org/bluez/hci0/dev_A4_C1_38_00_00_01",
            "/org/bluez/hci", "/org/bluez/hci0x",
        ]
        let child = try #require(DBusObjectPath(rawValue: path))
        for text in candidates {
            let parent = try #require(DBusObjectPath(rawValue: text))
            #expect(child.isChild(of: parent) == (child.parent == parent), "\(path) child of \(text)")
        }
    }

    @Test(
        "the argument count read off a signature is its number of complete types",
        arguments: [
            "", "s", "sa{sv}as", "a{oa{sa{sv}}}", "(ii)(s)", "aai", "v", "a(sv)ya{s(iv)}", "((s)a(ay))h",
            "aa{sa{sv}}ao",
        ])
    func argumentCount(signature: String) throws {
        let count = signature.withCString { MessageDecoder.argumentCount($0) }
        #expect(count == (try DBusSignature(signature)).types.count)
    }

    @Test("the string cache gives back the same text, for long and short strings, colliding or not")
    func stringCache() {
        let cache = StringCache()
        let texts =
            (0..<2000).map { "/org/bluez/hci\($0 % 3)/dev_A4_C1_38_5A_\(String($0, radix: 16))" }
            + ["PropertiesChanged", "org.bluez.Device1", "RSSI", "0000181a-0000-1000-8000-00805f9b34fb", ""]
            + ["héllo wörld, ünïcode", "a\u{1F600}b\u{1F600}c\u{1F600}d\u{1F600}"]
        for _ in 0..<2 {
            for text in texts {
                let decoded = text.withCString { cache.string($0) }
                #expect(decoded == text && decoded.utf8.elementsEqual(text.utf8))
            }
        }
    }

    @Test("accessors look through variants and read nested BlueZ-style dictionaries")
    func accessors() throws {
        let objects = DBusValue.dictionary(
            key: .objectPath, value: try DBusType("a{sa{sv}}"),
            [
                DBusDictionaryEntry(
                    .objectPath("/org/bluez/hci0/dev_AA"),
                    .dictionary(
                        key: .string, value: try DBusType("a{sv}"),
                        [
                            DBusDictionaryEntry(
                                .string("org.bluez.Device1"),
                                .variantDictionary(["RSSI": .int16(-60), "Name": "Thermo"]))
                        ]))
            ])
        let device = objects.dictionary?["/org/bluez/hci0/dev_AA"]?["org.bluez.Device1"]
        #expect(device?["RSSI"]?.int == -60)
        #expect(device?["Name"]?.string == "Thermo")
        #expect(device?["Missing"] == nil)
        #expect(DBusValue.bytes([1, 2, 3]).bytes == [1, 2, 3])
        #expect(DBusValue.strings(["a", "b"]).strings == ["a", "b"])
    }

    @Test("match rules print as AddMatch strings, quoting apostrophes")
    func matchRuleString() {
        let rule = DBusMatchRule(
            sender: "org.bluez", pathNamespace: "/org/bluez", interface: "org.freedesktop.DBus.Properties",
            member: "PropertiesChanged", arguments: [0: "it's"])
        #expect(
            rule.description
                == "type='signal',sender='org.bluez',path_namespace='/org/bluez',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',arg0='it'\\''s'"
        )
    }
}
