/// One API connection's framing and encryption, without a socket: bytes in, messages out, and the
/// bytes to send (handshake frames, encrypted messages). The server owns one per client; tests and
/// the fuzz target drive it directly.
///
/// Noise mode follows the ESPHome sequence: the client's hello frame (its content is ignored), our
/// server hello (`0x01`, the node name, `0x00`, the MAC, `0x00`), the client's handshake frame
/// (`0x00` then the Noise message), our handshake frame (`0x00` then ours) — or, when its tag fails
/// (another key), the rejection frame `0x01` "Handshake MAC failure" and the end of the connection.
public struct APITransport {
    /// Why a connection ends.
    public enum Failure: Error, Equatable, Sendable {
        case frame(FrameError)
        /// The client's Noise message failed (almost always: another encryption key).
        case handshakeRefused
        /// A handshake frame that is empty or does not start with 0x00.
        case malformedHandshake
        /// An encrypted frame whose tag fails, or shorter than its 4-byte header.
        case decryptionFailed
        /// The frame's content is shorter than its header says.
        case malformedMessage
        /// A plaintext frame (0x00) where the Noise client hello was expected: a plaintext client
        /// (Home Assistant's first try when a device is added). It was told that this side
        /// encrypts (the frame ESPHome sends: 0x01 "Bad indicator byte").
        case plaintextClient
        /// A handshake with a placeholder key (``placeholderKeys``, "all zeros"): Home Assistant's
        /// second try when a device is added, made only to read the node name from the server
        /// hello. Refused like any other key.
        case zeroKeyProbe
    }

    public enum Encryption: Sendable {
        case plaintext
        /// The 32-byte pre-shared key (the `encryption_key`).
        case noise(psk: [UInt8])
    }

    private enum State {
        case plaintext
        case awaitingClientHello
        case awaitingHandshake
        case ready(receive: NoiseCipher, send: NoiseCipher)
        case failed
    }

    /// The rejection text aioesphomeapi recognises as a wrong key.
    public static let handshakeRejection = "Handshake MAC failure"

    private var state: State
    private let psk: [UInt8]
    private let serverHello: [UInt8]
    private var plaintextDecoder: PlaintextFrameDecoder
    private var noiseDecoder: NoiseFrameDecoder
    private let testEphemeralKey: [UInt8]?
    /// A Noise server that takes a plaintext client too (an unprovisioned proxy with `plaintext`:
    /// the first byte of the connection decides).
    private let acceptsPlaintext: Bool
    private var receivedAny = false
    /// Bytes to send; the owner drains it.
    public var outgoing: [UInt8] = []

    /// - Parameters:
    ///   - name: the node name sent in the Noise server hello.
    ///   - mac: the MAC sent there (12 lower-case hex digits, as ESPHome devices send it).
    ///   - maxFrame: the largest frame accepted (payload bytes).
    public init(encryption: Encryption, name: String, mac: String, maxFrame: Int) {
        self.init(encryption: encryption, name: name, mac: mac, maxFrame: maxFrame, ephemeralKey: nil)
    }

    package init(
        encryption: Encryption, name: String, mac: String, maxFrame: Int, ephemeralKey: [UInt8]?,
        acceptsPlaintext: Bool = false
    ) {
        switch encryption {
        case .plaintext:
            state = .plaintext
            psk = []
        case .noise(let key):
            state = .awaitingClientHello
            psk = key
        }
        serverHello = [0x01] + Array(name.utf8) + [0x00] + Array(mac.utf8) + [0x00]
        plaintextDecoder = PlaintextFrameDecoder(maxPayload: maxFrame)
        noiseDecoder = NoiseFrameDecoder(maxFrame: maxFrame + 4 + NoiseCrypto.tagLength)
        testEphemeralKey = ephemeralKey
        self.acceptsPlaintext = acceptsPlaintext
    }

    /// The connection is (or will be, before the handshake) unencrypted.
    public var isPlaintext: Bool {
        if case .plaintext = state { return true }
        return false
    }

    /// True once messages may be sent (at once in plaintext, after the handshake with Noise).
    public var isReady: Bool {
        switch state {
        case .plaintext, .ready: return true
        default: return false
        }
    }

    /// Feeds received bytes; returns the whole messages they complete, in order. Throws when the
    /// connection must end; `outgoing` may then still hold a last frame to send (the rejection).
    public mutating func receive<C: Collection<UInt8>>(_ bytes: C) throws(Failure) -> [(type: UInt16, payload: [UInt8])]
    {
        var messages: [(type: UInt16, payload: [UInt8])] = []
        if acceptsPlaintext, !receivedAny, case .awaitingClientHello = state, bytes.first == 0x00 {
            // A plaintext client of a server that takes both (the Noise hello starts with 0x01).
            state = .plaintext
        }
        if !bytes.isEmpty { receivedAny = true }
        switch state {
        case .failed:
            throw .malformedMessage
        case .plaintext:
            plaintextDecoder.append(bytes)
            do {
                while let frame = try plaintextDecoder.next() { messages.append(frame) }
            } catch {
                state = .failed
                if case .badPreamble = error {
                    // A Noise client: tell it, in a plaintext-looking frame, what this side speaks.
                    outgoing += [0x00] + Array("Bad indicator byte".utf8)
                }
                throw .frame(error)
            }
            return messages
        default:
            noiseDecoder.append(bytes)
        }
        let previous = state
        while true {
            let frame: [UInt8]
            do {
                guard let next = try noiseDecoder.next() else { break }
                frame = next
            } catch {
                state = .failed
                if case .badPreamble(0) = error, case .awaitingClientHello = previous {
                    // A plaintext client: tell it, in a Noise frame, that this side encrypts.
                    outgoing += NoiseFrameDecoder.encode([0x01] + Array("Bad indicator byte".utf8)) ?? []
                    throw .plaintextClient
                }
                throw .frame(error)
            }
            do {
                if let message = try handleNoiseFrame(frame) { messages.append(message) }
            } catch {
                state = .failed
                throw error
            }
        }
        return messages
    }

    private mutating func handleNoiseFrame(_ frame: [UInt8]) throws(Failure) -> (type: UInt16, payload: [UInt8])? {
        switch state {
        case .awaitingClientHello:
            // The client hello carries nothing gattway needs.
            outgoing += NoiseFrameDecoder.encode(serverHello) ?? []
            state = .awaitingHandshake
            return nil
        case .awaitingHandshake:
            guard frame.first == 0x00 else { throw .malformedHandshake }
            guard var handshake = NoiseHandshake(psk: psk, ephemeralPrivateKey: testEphemeralKey),
                handshake.readClientMessage(frame.dropFirst()) != nil,
                let (message, receive, send) = handshake.writeServerMessage()
            else {
                outgoing += NoiseFrameDecoder.encode([0x01] + Array(Self.handshakeRejection.utf8)) ?? []
                throw Self.isZeroKeyHandshake(frame.dropFirst(), psk: psk) ? .zeroKeyProbe : .handshakeRefused
            }
            outgoing += NoiseFrameDecoder.encode([0x00] + message) ?? []
            state = .ready(receive: receive, send: send)
            return nil
        case .ready(var receive, let send):
            let plain = receive.decrypt(frame[...])
            state = .ready(receive: receive, send: send)
            guard let plain, plain.count >= 4 else { throw .decryptionFailed }
            let type = UInt16(plain[0]) << 8 | UInt16(plain[1])
            let length = Int(plain[2]) << 8 | Int(plain[3])
            guard length <= plain.count - 4 else { throw .malformedMessage }
            return (type, Array(plain[4..<(4 + length)]))
        case .plaintext, .failed:
            throw .malformedMessage
        }
    }

    /// The keys of clients that have none yet: Home Assistant's config flow uses 32 ASCII "0"
    /// (base64 `MDAw…MDA=`) to read the node name, aioesphomeapi's provisioning 32 zero bytes.
    static let placeholderKeys: [[UInt8]] = [
        [UInt8](repeating: 0x30, count: 32), [UInt8](repeating: 0x00, count: 32),
    ]

    /// The refused handshake message was made with a placeholder key (and this server's key is
    /// another): a client that has no key yet, not a wrong one.
    private static func isZeroKeyHandshake(_ message: ArraySlice<UInt8>, psk: [UInt8]) -> Bool {
        placeholderKeys.contains { key in
            guard key != psk, var probe = NoiseHandshake(psk: key) else { return false }
            return probe.readClientMessage(message) != nil
        }
    }

    /// Frames `message` for this connection (encrypting it with Noise); false before the
    /// handshake, for a payload too large for one Noise frame, or when encryption fails.
    @discardableResult
    public mutating func send(_ message: ServerMessage) -> Bool {
        switch state {
        case .plaintext:
            outgoing += PlaintextFrameDecoder.encode(message)
            return true
        case .ready(let receive, var send):
            let count = message.payload.count
            guard count <= 0xFFFF - 4 - NoiseCrypto.tagLength else { return false }
            let header: [UInt8] = [
                UInt8(truncatingIfNeeded: message.type >> 8), UInt8(truncatingIfNeeded: message.type),
                UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count),
            ]
            let sealed = send.encrypt(header + message.payload)
            state = .ready(receive: receive, send: send)
            guard let sealed, let frame = NoiseFrameDecoder.encode(sealed) else { return false }
            outgoing += frame
            return true
        default:
            return false
        }
    }
}

extension APITransport.Failure: CustomStringConvertible {
    public var description: String {
        switch self {
        case .frame(let error): error.description
        case .handshakeRefused: "Noise handshake refused (another key)"
        case .malformedHandshake: "a handshake frame that is empty or does not start with 0x00"
        case .decryptionFailed: "an encrypted frame that does not decrypt"
        case .malformedMessage: "a message shorter than its header says"
        case .plaintextClient: "a plaintext hello to the Noise server"
        case .zeroKeyProbe: "a Noise handshake with the all-zero key"
        }
    }
}
