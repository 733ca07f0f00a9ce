import DBus
import Testing

@Suite("Name ownership and NameOwnerChanged")
struct NameTests {
    @Test("requesting and releasing a well-known name, observed through NameOwnerChanged")
    func requestAndRelease() async throws {
        try await TestBus.run { bus in
            let owner = try await bus.connect()
            let rival = try await bus.connect()
            let watcher = try await bus.connect()
            let changes = try await watcher.nameOwnerChanges(of: "org.bluez")
            var iterator = changes.makeAsyncIterator()
            #expect(try await watcher.nameOwner("org.bluez") == nil)

            #expect(try await owner.requestName("org.bluez") == .primaryOwner)
            #expect(try await owner.requestName("org.bluez") == .alreadyOwner)
            #expect(try await rival.requestName("org.bluez", flags: [.doNotQueue]) == .exists)
            #expect(try await rival.requestName("org.bluez", flags: []) == .inQueue)
            #expect(try await watcher.nameOwner("org.bluez") == owner.uniqueName)
            let acquired = try await next(&iterator)
            #expect(acquired == DBusNameOwnerChange(name: "org.bluez", oldOwner: nil, newOwner: owner.uniqueName))

            // Calls by well-known name reach the owner.
            try await owner.export(
                [DBusInterface("org.gattway.Test", methods: [.immediate("Who", out: [.string]) { _ in ["owner"] }])],
                at: "/")
            #expect(
                try await watcher.call(
                    destination: "org.bluez", path: "/", interface: "org.gattway.Test", method: "Who") == ["owner"])

            #expect(try await owner.releaseName("org.bluez") == .released)
            #expect(try await owner.releaseName("org.bluez") == .notOwner)
            #expect(try await watcher.releaseName("org.gattway.never") == .nonExistent)
            // The queued rival takes over.
            let handover = try await next(&iterator)
            #expect(
                handover
                    == DBusNameOwnerChange(name: "org.bluez", oldOwner: owner.uniqueName, newOwner: rival.uniqueName))
            await rival.close()
            let gone = try await next(&iterator)
            #expect(gone.oldOwner == rival.uniqueName && gone.newOwner == nil)
            await owner.close()
            await watcher.close()
        }
    }

    @Test("a server notices when a client leaves the bus")
    func clientVanishes() async throws {
        try await TestBus.run { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            let clientName = client.uniqueName
            let leaving = try await server.nameOwnerChanges()
            var iterator = leaving.makeAsyncIterator()
            await client.close()
            var change = try await next(&iterator)
            while !(change.isClientLeaving && change.name == clientName) { change = try await next(&iterator) }
            #expect(change.oldOwner == clientName)
            await server.close()
        }
    }

    @Test("connecting to a socket that does not exist is a typed error")
    func badAddress() async throws {
        try await TestBus.run { bus in
            await #expect {
                _ = try await DBusConnection.connect(to: .address("unix:path=/nonexistent/gattway/bus"), on: bus.loop)
            } throws: { error in
                guard let error = error as? DBusError else { return false }
                return error.name.rawValue.hasPrefix("org.freedesktop.DBus.Error.")
            }
        }
    }
}
