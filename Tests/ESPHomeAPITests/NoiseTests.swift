import Foundation
import Testing

@testable import ESPHomeAPI

/// gattway's Noise responder against vectors made by the `noiseprotocol` package (the Noise
/// implementation aioesphomeapi uses) with fixed ephemeral keys: Tests/Fixtures/esphome/make_noise_vectors.py.
@Suite("ESPHome API Noise")
struct NoiseTests {
    struct Vectors: Decodable {
        var psk: String
        var server_ephemeral_private: String
        var client_handshake: String
        var server_handshake: String
        var client_handshake_wrong_psk: String
        var to_server_plain: [String]
        var to_server_cipher: [String]
        var to_client_plain: [String]
        var to_client_cipher: [String]
    }

    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16) ?? 0)
            index = next
        }
        return bytes
    }

    static func vectors() throws -> Vectors {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/esphome/noise-vectors.json")
        return try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: url))
    }

    @Test func primitivesMatchKnownAnswers() {
        // SHA-256("abc") and RFC 7748 §6.1's X25519 key pair.
        #expect(
            NoiseCrypto.sha256(Array("abc".utf8))
                == Self.hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        let alice = Self.hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
        #expect(
            NoiseCrypto.x25519PublicKey(privateKey: alice)
                == Self.hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
        // RFC 4231 test case 2.
        #expect(
            NoiseCrypto.hmac(key: Array("Jefe".utf8), data: Array("what do ya want for nothing?".utf8))
                == Self.hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
        // An all-zero (small-order) peer key is refused, not a trap.
        #expect(NoiseCrypto.x25519(privateKey: alice, peerPublicKey: [UInt8](repeating: 0, count: 32)) == nil)
    }

    @Test func handshakeAndTransportMatchNoiseprotocol() throws {
        let v = try Self.vectors()
        var handshake = try #require(
            NoiseHandshake(psk: Self.hex(v.psk), ephemeralPrivateKey: Self.hex(v.server_ephemeral_private)))
        #expect(handshake.readClientMessage(Self.hex(v.client_handshake)[...]) == [])
        let written = handshake.writeServerMessage()
        let (message, receiveCipher, sendCipher) = try #require(written)
        var receive = receiveCipher
        var send = sendCipher
        #expect(message == Self.hex(v.server_handshake))
        for (plain, cipher) in zip(v.to_server_plain, v.to_server_cipher) {
            #expect(receive.decrypt(Self.hex(cipher)[...]) == Self.hex(plain))
        }
        for (plain, cipher) in zip(v.to_client_plain, v.to_client_cipher) {
            #expect(send.encrypt(Self.hex(plain)) == Self.hex(cipher))
        }
    }

    @Test func wrongKeyIsRefused() throws {
        let v = try Self.vectors()
        var handshake = try #require(
            NoiseHandshake(psk: Self.hex(v.psk), ephemeralPrivateKey: Self.hex(v.server_ephemeral_private)))
        #expect(handshake.readClientMessage(Self.hex(v.client_handshake_wrong_psk)[...]) == nil)
    }

    /// The whole ESPHome Noise sequence through APITransport, bytes as aioesphomeapi sends them.
    @Test func transportHandshake() throws {
        let v = try Self.vectors()
        var transport = APITransport(
            encryption: .noise(psk: Self.hex(v.psk)), name: "pi", mac: "aabbccddeeff", maxFrame: 1024,
            ephemeralKey: Self.hex(v.server_ephemeral_private))
        let clientHandshake = [0x00] + Self.hex(v.client_handshake)
        let hello: [UInt8] = [0x01, 0x00, 0x00, 0x01, 0x00, UInt8(clientHandshake.count)] + clientHandshake
        #expect(try transport.receive(hello).isEmpty)
        let serverHello: [UInt8] = [0x01] + Array("pi".utf8) + [0] + Array("aabbccddeeff".utf8) + [0]
        let serverHandshake = [0x00] + Self.hex(v.server_handshake)
        #expect(
            transport.outgoing == [0x01, 0x00, UInt8(serverHello.count)] + serverHello
                + [0x01, 0x00, UInt8(serverHandshake.count)] + serverHandshake)
        #expect(transport.isReady)
        transport.outgoing = []
        let ping = Self.hex(v.to_server_cipher[0])
        let messages = try transport.receive([0x01, 0x00, UInt8(ping.count)] + ping)
        #expect(messages.map(\.type) == [7])
        transport.send(.empty(8))
        let pong = Self.hex(v.to_client_cipher[0])
        #expect(transport.outgoing == [0x01, 0x00, UInt8(pong.count)] + pong)
    }

    @Test func transportRejectsWrongKey() throws {
        let v = try Self.vectors()
        var transport = APITransport(encryption: .noise(psk: Self.hex(v.psk)), name: "pi", mac: "", maxFrame: 1024)
        let bad = [0x00] + Self.hex(v.client_handshake_wrong_psk)
        #expect(throws: APITransport.Failure.handshakeRefused) {
            _ = try transport.receive([0x01, 0x00, 0x00, 0x01, 0x00, UInt8(bad.count)] + bad)
        }
        let rejection = [0x01] + Array("Handshake MAC failure".utf8)
        #expect(transport.outgoing.suffix(rejection.count + 3) == [0x01, 0x00, UInt8(rejection.count)] + rejection)
    }
}

extension NoiseTests {
    /// The initiator side (APIProbe's) against the same vectors.
    @Test func initiatorMatchesNoiseprotocol() throws {
        let v = try Self.vectors()
        let clientKey = Self.hex("1111111111111111111111111111111111111111111111111111111111111140")
        var handshake = try #require(NoiseHandshake(psk: Self.hex(v.psk), ephemeralPrivateKey: clientKey))
        #expect(handshake.writeClientMessage() == Self.hex(v.client_handshake))
        let split = handshake.readServerMessage(Self.hex(v.server_handshake)[...])
        var (send, receive) = try #require(split)
        #expect(send.encrypt(Self.hex(v.to_server_plain[0])) == Self.hex(v.to_server_cipher[0]))
        #expect(receive.decrypt(Self.hex(v.to_client_cipher[0])[...]) == Self.hex(v.to_client_plain[0]))
    }
}
