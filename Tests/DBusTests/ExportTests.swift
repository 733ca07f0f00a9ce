import DBus
import TestSupport
import Testing

let deviceInterface = "org.bluez.Device1"

func device(name: String, rssi: Int16?, onSetAlias: (@Sendable (DBusValue, DBusMessage) throws -> Void)? = nil)
    -> DBusInterface
{
    DBusInterface(
        deviceInterface,
        methods: [DBusMethod("Connect") { _ in [] }],
        properties: [
            DBusProperty("Name", type: .string, value: .string(name)),
            DBusProperty("Alias", type: .string, access: .readwrite, value: .string(name), onSet: onSetAlias),
            DBusProperty("RSSI", type: .int16, value: rssi.map { .int16($0) }),
            DBusProperty("Connected", type: .boolean, value: false),
        ],
        signals: [])
}

@Suite("Exported objects: Properties, ObjectManager, Introspectable")
struct ExportTests {
    @Test("Properties Get, GetAll and Set work, with the standard errors")
    func properties() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            try await server.export(
                [
                    device(
                        name: "Thermo", rssi: nil,
                        onSetAlias: { value, _ in
                            if value.string == "forbidden" {
                                throw DBusError("org.bluez.Error.InvalidArguments", "bad alias")
                            }
                        })
                ], at: "/dev")
            let name = server.uniqueName
            func properties(_ method: String, _ arguments: [DBusValue]) async throws -> [DBusValue] {
                try await client.call(
                    destination: name, path: "/dev", interface: "org.freedesktop.DBus.Properties", method: method,
                    arguments: arguments)
            }
            #expect(try await properties("Get", [.string(deviceInterface), "Name"]) == [.variant("Thermo")])
            let all = try await properties("GetAll", [.string(deviceInterface)])
            #expect(all.first?.dictionary?.keys.sorted() == ["Alias", "Connected", "Name"])  // RSSI absent
            #expect(all.first?["Connected"]?.bool == false)

            let changes = try await client.signals(
                matching: DBusMatchRule(
                    sender: name, path: "/dev", interface: "org.freedesktop.DBus.Properties",
                    member: "PropertiesChanged"))
            var iterator = changes.makeAsyncIterator()
            _ = try await properties("Set", [.string(deviceInterface), "Alias", .variant("Kitchen")])
            #expect(try await properties("Get", [.string(deviceInterface), "Alias"]) == [.variant("Kitchen")])
            let signal = try await next(&iterator)
            #expect(signal.arguments[0] == .string(deviceInterface))
            #expect(signal.arguments[1].dictionary == ["Alias": .variant("Kitchen")])

            let failures: [([DBusValue], DBusError.Name)] = [
                ([.string(deviceInterface), "RSSI"], .invalidArgs),  // absent
                ([.string(deviceInterface), "Nope"], .invalidArgs),
                ([.string("org.bluez.Nope1"), "Name"], .invalidArgs),
            ]
            for (arguments, error) in failures {
                await #expect { _ = try await properties("Get", arguments) } throws: {
                    ($0 as? DBusError)?.name == error
                }
            }
            let setFailures: [([DBusValue], DBusError.Name)] = [
                ([.string(deviceInterface), "Nope", .variant(1)], .unknownProperty),
                ([.string(deviceInterface), "Name", .variant("x")], .propertyReadOnly),
                ([.string(deviceInterface), "Alias", .variant(1)], .invalidSignature),
                ([.string(deviceInterface), "Alias", .variant("forbidden")], "org.bluez.Error.InvalidArguments"),
            ]
            for (arguments, error) in setFailures {
                await #expect { _ = try await properties("Set", arguments) } throws: {
                    ($0 as? DBusError)?.name == error
                }
            }
            #expect(try await properties("Get", [.string(deviceInterface), "Alias"]) == [.variant("Kitchen")])
            await client.close()
            await server.close()
        }
    }

    @Test("several changes go out in ONE PropertiesChanged, removed ones as invalidated")
    func coalescedPropertiesChanged() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            try await server.export([device(name: "Thermo", rssi: -60)], at: "/dev")
            let changes = try await client.signals(
                matching: DBusMatchRule(
                    path: "/dev", interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged"))
            var iterator = changes.makeAsyncIterator()
            try await server.setProperties(
                ["Connected": true, "Name": "Thermo 2", "RSSI": nil], interface: deviceInterface, at: "/dev")
            try await server.setProperty("Connected", to: false, interface: deviceInterface, at: "/dev")
            let first = try await next(&iterator)
            #expect(first.signature.description == "sa{sv}as")
            #expect(first.arguments[1].entries?.map(\.key) == ["Connected", "Name"])
            #expect(first.arguments[1]["Connected"]?.bool == true)
            #expect(first.arguments[2].strings == ["RSSI"])
            let second = try await next(&iterator)
            #expect(second.arguments[1].dictionary == ["Connected": .variant(false)])
            var built: [(key: String, value: DBusValue?)] = []
            for (name, value) in [("Name", DBusValue.string("Thermo 3")), ("Connected", .boolean(true))] {
                built.append((name, value))
            }
            try await server.setProperties(built, interface: deviceInterface, at: "/dev")
            let third = try await next(&iterator)
            #expect(
                third.arguments[1].entries?.map(\.key) == ["Name", "Connected"],
                "a list built at run time also goes out as one signal")
            #expect(await server.property("RSSI", interface: deviceInterface, at: "/dev") == nil)
            await #expect {
                try await server.setProperty("Connected", to: "yes", interface: deviceInterface, at: "/dev")
            } throws: { ($0 as? DBusError)?.name == .invalidArgs }
            await client.close()
            await server.close()
        }
    }

    @Test("ObjectManager: GetManagedObjects, InterfacesAdded and InterfacesRemoved, and silent removal")
    func objectManager() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            await server.addObjectManager(at: .root)
            try await server.export(
                [
                    DBusInterface(
                        "org.bluez.Adapter1", properties: [DBusProperty("Powered", type: .boolean, value: true)])
                ],
                at: "/org/bluez/hci0")
            let name = server.uniqueName
            let added = try await client.signals(
                matching: DBusMatchRule(
                    sender: name, path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded")
            )
            let removed = try await client.signals(
                matching: DBusMatchRule(
                    sender: name, path: "/", interface: "org.freedesktop.DBus.ObjectManager",
                    member: "InterfacesRemoved"))
            var addedIterator = added.makeAsyncIterator()
            var removedIterator = removed.makeAsyncIterator()

            try await server.export([device(name: "Thermo", rssi: -42)], at: "/org/bluez/hci0/dev_AA")
            let signal = try await next(&addedIterator)
            #expect(signal.arguments[0].objectPath == "/org/bluez/hci0/dev_AA")
            let interfaces = try #require(signal.arguments[1].dictionary)
            #expect(
                interfaces.keys.sorted() == [
                    "org.bluez.Device1", "org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.Properties",
                ])
            #expect(interfaces["org.bluez.Device1"]?["RSSI"]?.int == -42)

            let managed = try await client.call(
                destination: name, path: "/", interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects",
                expecting: try DBusSignature("a{oa{sa{sv}}}"))
            let objects = try #require(managed.first?.dictionary)
            #expect(objects.keys.sorted() == ["/org/bluez/hci0", "/org/bluez/hci0/dev_AA"])
            #expect(objects["/org/bluez/hci0"]?["org.bluez.Adapter1"]?["Powered"]?.bool == true)
            #expect(objects["/org/bluez/hci0/dev_AA"]?["org.bluez.Device1"]?["Name"]?.string == "Thermo")
            #expect(objects["/org/bluez/hci0/dev_AA"]?["org.freedesktop.DBus.Properties"]?.entries?.isEmpty == true)

            // A second interface on the same object: only it is announced.
            try await server.export(
                [
                    DBusInterface(
                        "org.bluez.Battery1", properties: [DBusProperty("Percentage", type: .byte, value: .byte(80))])
                ], at: "/org/bluez/hci0/dev_AA")
            let battery = try await next(&addedIterator)
            #expect(battery.arguments[1].dictionary?.keys.sorted() == ["org.bluez.Battery1"])

            try await server.unexport(["org.bluez.Battery1"], at: "/org/bluez/hci0/dev_AA")
            #expect(try await next(&removedIterator).arguments[1].strings == ["org.bluez.Battery1"])
            try await server.unexport(at: "/org/bluez/hci0/dev_AA")
            let gone = try await next(&removedIterator)
            #expect(gone.arguments[0].objectPath == "/org/bluez/hci0/dev_AA")
            #expect(gone.arguments[1].strings?.contains("org.bluez.Device1") == true)
            #expect(gone.arguments[1].strings?.contains("org.freedesktop.DBus.Properties") == true)

            // Silent removal: the object disappears and no InterfacesRemoved is sent.
            await server.unexportSilently()
            try await server.emit(path: "/", interface: "org.gattway.Test", member: "Sentinel")
            let empty = try await client.call(
                destination: name, path: "/", interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects")
            #expect(empty.first?.entries?.isEmpty == true)
            let sentinel = try await client.signals(matching: DBusMatchRule(sender: name, member: "Sentinel2"))
            var sentinelIterator = sentinel.makeAsyncIterator()
            try await server.emit(path: "/", interface: "org.gattway.Test", member: "Sentinel2")
            _ = try await next(&sentinelIterator)
            let late = try? await next(&removedIterator, within: 0.2)
            #expect(late == nil)
            await client.close()
            await server.close()
        }
    }

    @Test("Introspect describes interfaces, properties and child nodes")
    func introspection() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            await server.addObjectManager(at: .root)
            try await server.export([device(name: "Thermo", rssi: nil)], at: "/org/bluez/hci0/dev_AA")
            let name = server.uniqueName
            let device = try await client.call(
                destination: name, path: "/org/bluez/hci0/dev_AA", interface: "org.freedesktop.DBus.Introspectable",
                method: "Introspect")
            let xml = try #require(device.first?.string)
            #expect(xml.contains("<interface name=\"org.bluez.Device1\">"))
            #expect(xml.contains("<property name=\"Alias\" type=\"s\" access=\"readwrite\"/>"))
            #expect(xml.contains("<method name=\"Connect\">"))
            let root = try await client.call(
                destination: name, path: "/", interface: "org.freedesktop.DBus.Introspectable", method: "Introspect")
            #expect(root.first?.string?.contains("<node name=\"org\"/>") == true)
            #expect(root.first?.string?.contains("org.freedesktop.DBus.ObjectManager") == true)
            let middle = try await client.call(
                destination: name, path: "/org/bluez", interface: "org.freedesktop.DBus.Introspectable",
                method: "Introspect")
            #expect(middle.first?.string?.contains("<node name=\"hci0\"/>") == true)
            let busctl = try await ChildProcess.run("busctl", ["--address=\(bus.daemon.address)", "tree", name])
            #expect(busctl.output.contains("/org/bluez/hci0/dev_AA"), "\(busctl.output)")
            let gdbus = try await ChildProcess.run(
                "gdbus",
                [
                    "call", "--address", bus.daemon.address, "--dest", name, "--object-path", "/org/bluez/hci0/dev_AA",
                    "--method", "org.freedesktop.DBus.Properties.Get", "org.bluez.Device1", "Name",
                ])
            #expect(gdbus.output.contains("(<'Thermo'>,)"), "\(gdbus.output)")
            await client.close()
            await server.close()
        }
    }
}
