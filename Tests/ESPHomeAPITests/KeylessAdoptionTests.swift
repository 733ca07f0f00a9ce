import ESPHomeAPI
import EventLoop
import Glibc
import LocalSystem
import Synchronization
import Testing

/// Keyless adoption (`bluetooth_proxy.provisioning`, docs/ha-bluetooth-proxy.md): an unprovisioned
/// proxy takes the all-zero key, a client sets the real one, which is stored and used from the
/// next handshake on; what is refused is refused as ESPHome refuses it.
@Suite("ESPHome API: keyless adoption", .serialized)
struct KeylessAdoptionTests {
    static let key = [UInt8](100..<132)
    static let other = [UInt8](1...32)

    static func text(_ key: [UInt8]) -> [UInt8] { Array(APIKey.encode(key).utf8) }

    /// A temporary state directory, removed by the caller.
    static func directory() -> String {
        var template = Array("/tmp/kl-keystore.XXXXXX".utf8CString)
        let path = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!).map { String(cString: $0) } }
        return path ?? "/tmp"
    }

    /// What the server told `keyChanged`: provisionable or not, in order.
    final class Changes: Sendable {
        let list = Mutex<[Bool]>([])
    }

    final class Proxy: @unchecked Sendable {
        let loop = EventLoop(name: "api-keyless-test")
        let server: APIServer
        let port: UInt16
        let changes = Changes()

        init(
            encryption: APITransport.Encryption, provisioning: Bool = true, plaintext: Bool = false,
            store: APIKeyStore?
        ) async throws {
            var configuration = APIServerConfiguration(
                host: "127.0.0.1", port: 0, encryption: encryption, name: "keylesspi", friendlyName: "Keyless Pi",
                macAddress: "AA:BB:CC:DD:EE:FF", bluetoothMacAddress: "AA:BB:CC:DD:EE:FF", version: "0.0-test",
                maxClients: 8, connectionSlots: 0)
            configuration.provisioning = provisioning
            configuration.plaintextWhileUnprovisioned = plaintext
            let (loop, changes) = (self.loop, self.changes)
            server = try await loop.submit { [configuration] in
                let server = APIServer(configuration: configuration, loop: loop, keyStore: store) { _, _ in }
                server.keyChanged = { changed in changes.list.withLock { $0.append(changed.provisionable) } }
                try server.start()
                return server
            }
            port = try await loop.submit { [server] in server.port }
        }

        func session(_ psk: [UInt8]?) -> Result<APIProbe.Session, APIProbe.Failure> {
            APIProbe.Session.open(host: "127.0.0.1", port: port, psk: psk, timeout: 5)
        }

        func statistics() async -> APIServerStatistics {
            (try? await loop.submit { [server] in server.statistics }) ?? APIServerStatistics()
        }

        func stop() async {
            _ = try? await loop.submit { [server] in server.stop() }
            loop.shutdown()
        }
    }

    @Test("the key text: 44 characters of canonical base64, nothing else")
    func keyText() {
        #expect(APIKey.decode(Self.text(Self.key)) == Self.key)
        #expect(APIKey.decode(Self.text(Self.key) + [0x0A]) == Self.key)
        #expect(APIKey.encode(APIKey.zero) == "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
        #expect(APIKey.decode(Array("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=".utf8)) == Array(0..<32))
        for bad in [
            "", "c2hvcnQ=", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",
            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh9=",
            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh*=", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8==",
        ] {
            #expect(APIKey.decode(Array(bad.utf8)) == nil, "\(bad)")
        }
    }

    @Test("the store: mode 0600, read back, a file that is not a key ignored, forgotten")
    func store() throws {
        let directory = Self.directory()
        defer { LocalFile.removeTree(directory) }
        let store = APIKeyStore(directory: directory)
        #expect(store.load().key == nil && store.load().problem == nil)
        try store.save(Self.key)
        #expect(store.load().key == Self.key && store.load().problem == nil)
        #expect(LocalFile.permissions(store.path)?.mode == 0o600)
        #expect(LocalFile.readText(store.path) == APIKey.encode(Self.key) + "\n")
        #expect(!LocalFile.exists(store.path + ".tmp"))
        chmod(store.path, 0o644)
        #expect(store.load().key == Self.key && store.load().problem?.contains("chmod 600") == true)
        for junk in ["not a key\n", APIKey.encode(APIKey.zero) + "\n", String(repeating: "A", count: 1000)] {
            try LocalFile.write(junk, to: store.path, mode: 0o600)
            let (key, problem) = store.load()
            #expect(key == nil && problem?.contains("ignored") == true, "\(junk.prefix(20))")
        }
        #expect(try store.forget())
        #expect(try !store.forget())
        #expect(store.load().key == nil)
    }

    @Test("unprovisioned: the zero key connects, says provisionable; a key is set, stored, used from then on")
    func provisioning() async throws {
        let directory = Self.directory()
        defer { LocalFile.removeTree(directory) }
        let store = APIKeyStore(directory: directory)
        let proxy = try await Proxy(encryption: .noise(psk: APIKey.zero), store: store)
        // Another key, and plaintext (plaintext is false), are refused.
        #expect(throws: APIProbe.Failure.self) { try proxy.session(Self.other).get() }
        #expect(throws: APIProbe.Failure.self) { try proxy.session(nil).get() }
        var first = try proxy.session(APIKey.zero).get()
        var second = try proxy.session(APIKey.zero).get()
        #expect(try first.encryption() == (supported: true, provisionable: true))
        // The zero key and malformed keys are refused; nothing is stored.
        #expect(try !first.setKey(Self.text(APIKey.zero)))
        #expect(try !first.setKey(Array("c2hvcnQ=".utf8)))
        #expect(try !first.setKey(Self.text(Self.key) + Self.text(Self.key)))
        #expect(!LocalFile.exists(store.path))
        #expect(try first.setKey(Self.text(Self.key)))
        #expect(store.load().key == Self.key)
        // The second client connected with the zero key before: its set-key is refused now.
        #expect(try !second.setKey(Self.text(Self.other)))
        #expect(store.load().key == Self.key)
        // Every client is asked to disconnect, to come back with the new key.
        #expect(first.disconnectRequested() && second.disconnectRequested())
        first.close()
        second.close()
        #expect(proxy.changes.list.withLock { $0 } == [false])
        #expect(throws: APIProbe.Failure.self) { try proxy.session(APIKey.zero).get() }
        var again = try proxy.session(Self.key).get()
        #expect(try again.encryption() == (supported: true, provisionable: false))
        // A rotation with the key (Home Assistant rotates keys so).
        #expect(try again.setKey(Self.text(Self.other)))
        again.close()
        #expect(store.load().key == Self.other)
        #expect(throws: APIProbe.Failure.self) { try proxy.session(Self.key).get() }
        // An empty key forgets the stored one: unprovisioned again.
        var rotated = try proxy.session(Self.other).get()
        #expect(try rotated.setKey([]))
        rotated.close()
        #expect(!LocalFile.exists(store.path))
        var zero = try proxy.session(APIKey.zero).get()
        #expect(try zero.encryption().provisionable)
        zero.close()
        #expect(proxy.changes.list.withLock { $0 } == [false, false, true])
        let statistics = await proxy.statistics()
        #expect(statistics.keysSet == 3 && statistics.keysRefused == 4, "\(statistics)")
        await proxy.stop()
    }

    @Test(
        "the stored key removed while the proxy runs (gattway proxy reset-key): unprovisioned from the next client on")
    func storeRemovedWhileRunning() async throws {
        let directory = Self.directory()
        defer { LocalFile.removeTree(directory) }
        let store = APIKeyStore(directory: directory)
        let proxy = try await Proxy(encryption: .noise(psk: APIKey.zero), provisioning: true, store: store)
        var first = try proxy.session(APIKey.zero).get()
        #expect(try first.setKey(Self.text(Self.key)))
        first.close()
        try proxy.session(Self.key).get().close()
        #expect(throws: APIProbe.Failure.self) { try proxy.session(APIKey.zero).get() }
        #expect(try store.forget())  // what `gattway proxy reset-key` does
        var zero = try proxy.session(APIKey.zero).get()
        #expect(try zero.encryption().provisionable)
        zero.close()
        #expect(throws: APIProbe.Failure.self) { try proxy.session(Self.key).get() }
        #expect(proxy.changes.list.withLock { $0 } == [false, true])
        await proxy.stop()
    }

    @Test("a configured key wins: set-key refused, the zero key refused, nothing stored")
    func configuredKeyWins() async throws {
        let directory = Self.directory()
        defer { LocalFile.removeTree(directory) }
        let proxy = try await Proxy(encryption: .noise(psk: Self.key), provisioning: false, store: nil)
        var session = try proxy.session(Self.key).get()
        #expect(try session.encryption() == (supported: true, provisionable: false))
        #expect(try !session.setKey(Self.text(Self.other)))
        session.close()
        #expect(throws: APIProbe.Failure.self) { try proxy.session(APIKey.zero).get() }
        try proxy.session(Self.key).get().close()
        await proxy.stop()
    }

    @Test("with plaintext: plaintext clients served while unprovisioned, a key never taken from them")
    func plaintextWhileUnprovisioned() async throws {
        let directory = Self.directory()
        defer { LocalFile.removeTree(directory) }
        let store = APIKeyStore(directory: directory)
        let proxy = try await Proxy(encryption: .noise(psk: APIKey.zero), plaintext: true, store: store)
        var plain = try proxy.session(nil).get()
        #expect(try plain.encryption() == (supported: true, provisionable: true))
        #expect(try !plain.setKey(Self.text(Self.key)))
        #expect(!LocalFile.exists(store.path))
        var zero = try proxy.session(APIKey.zero).get()
        #expect(try zero.setKey(Self.text(Self.key)))
        plain.close()
        zero.close()
        // Provisioned: plaintext refused from now on.
        #expect(throws: APIProbe.Failure.self) { try proxy.session(nil).get() }
        try proxy.session(Self.key).get().close()
        await proxy.stop()
    }

    @Test("a key that cannot be stored is refused, and the old key stays")
    func unwritableStore() async throws {
        let store = APIKeyStore(directory: "/nonexistent/kl-state")
        let proxy = try await Proxy(encryption: .noise(psk: APIKey.zero), store: store)
        var session = try proxy.session(APIKey.zero).get()
        #expect(try !session.setKey(Self.text(Self.key)))
        #expect(try session.encryption().provisionable)
        session.close()
        try proxy.session(APIKey.zero).get().close()
        await proxy.stop()
    }
}
