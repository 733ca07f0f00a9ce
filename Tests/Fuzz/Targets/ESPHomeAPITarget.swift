import Bluetooth
import ESPHomeAPI
import JSON

extension FuzzTargets {
    /// What a LAN client sends to the Bluetooth proxy's ESPHome API server (docs/ha-bluetooth-proxy.md):
    /// bytes in plaintext or Noise framing, through the frame decoders, the Noise handshake, the
    /// protobuf decoder and the session (APISession, the server's per-client state machine without
    /// its socket), in chunks as TCP would cut them.
    ///
    /// Encoding: a mode byte (bit 0: Noise with the vectors' key and server ephemeral key, so the
    /// seeds' handshake and encrypted frames are valid; bit 1: connections through the proxy are
    /// served, so device requests — pair, unpair and clear cache too — and GATT requests are handed on
    /// as proxy requests; bit 2: keyless adoption (`provisioning`), so NoiseEncryptionSetKeyRequest
    /// is handed on as a key to set; bit 3 with bit 2 and without bit 0: an unprovisioned proxy,
    /// the all-zero key, that serves plaintext clients too), then chunks (a length byte, the bytes).
    /// Properties: no trap; a session that ended sends nothing more and stays ended; the bytes it
    /// sends stay proportional to what it received (no amplification); a protobuf payload that
    /// decodes as a HelloRequest encodes back to one that decodes the same; a key handed on only with
    /// provisioning, at most 45 bytes kept of it, and one that decodes as a key encodes back to the
    /// same text.
    static let esphomeAPI = FuzzTarget(
        name: "esphome-api",
        summary: "client bytes through the ESPHome API frame, Noise, protobuf decoders and the session",
        seeds: { ESPHomeAPISeeds.all },
        run: { bytes in
            var input = FuzzInput(bytes)
            let mode = input.byte()
            var configuration = ESPHomeAPISeeds.configuration(noise: mode & 1 != 0)
            configuration.maxFrame = 512
            if mode & 2 != 0 {
                // What the server announces with a backend (pair, unpair, clear cache included).
                configuration.features.formUnion([.activeConnections, .remoteCaching, .pairing, .cacheClearing])
            }
            if mode & 4 != 0 {
                configuration.provisioning = true
                if mode & 9 == 8 {
                    configuration.encryption = .noise(psk: APIKey.zero)
                    configuration.plaintextWhileUnprovisioned = true
                }
            }
            var session = APISession(
                configuration: configuration, ephemeralKey: mode & 1 != 0 ? ESPHomeAPISeeds.serverEphemeral : nil)
            var received = 0
            var ended = false
            var proxyRequests = 0
            while !input.isEmpty {
                let chunk = input.chunk()
                received += chunk.count
                let before = session.outgoing.count
                let outcome = session.receive(chunk, scanner: ScannerStatus(state: .running, mode: .active))
                if ended {
                    fuzzProperty(session.outgoing.count == before, "an ended session sent more bytes")
                    fuzzProperty(outcome.failure == nil, "an ended session failed again")
                }
                fuzzProperty(!(outcome.failure != nil && !session.closing), "a failure that did not end the session")
                ended = session.closing
                // Proxy requests only when served, and each from a message of its own (≥ 3 bytes).
                fuzzProperty(
                    outcome.proxyRequests.isEmpty || mode & 2 != 0, "a proxy request while connections are not served")
                proxyRequests += outcome.proxyRequests.count
                if let key = outcome.setKey {
                    fuzzProperty(mode & 4 != 0, "a key handed on without provisioning")
                    fuzzProperty(key.count <= APIKey.textLength + 1, "\(key.count) bytes of a key kept")
                    if let decoded = APIKey.decode(key) {
                        fuzzProperty(
                            Array(APIKey.encode(decoded).utf8) == Array(key.prefix(APIKey.textLength)),
                            "a key that does not encode back to its text")
                    }
                }
                fuzzProperty(proxyRequests * 3 <= received, "more proxy requests than messages")
                // Each client message is answered with at most one bounded message.
                fuzzProperty(
                    session.outgoing.count <= 400 * (received + 1),
                    "\(session.outgoing.count) bytes out for \(received) in")
            }
            // The protobuf decoder on the raw input as any message type.
            let type = UInt16(truncatingIfNeeded: mode)
            if let message = try? ClientMessage.decode(type: type, payload: bytes.dropFirst()),
                case .hello(let info, let major, let minor) = message
            {
                var writer = ProtobufWriter()
                writer.string(1, info)
                writer.uint32(2, major)
                writer.uint32(3, minor)
                let again = try? ClientMessage.decode(type: MessageType.helloRequest, payload: writer.bytes[...])
                fuzzProperty(again == message, "HelloRequest did not survive encode → decode")
            }
        })
}

/// Seeds for ``FuzzTargets/esphomeAPI``: a plaintext session (hello, device info, list entities,
/// subscribe, ping, device request, disconnect) and the Noise vectors' handshake and frames.
enum ESPHomeAPISeeds {
    static let vectors: JSONValue? = FixtureFiles.repositoryFile("Tests/Fixtures/esphome/noise-vectors.json").flatMap {
        try? JSONValue.parse($0)
    }

    static func hex(_ key: String) -> [UInt8] {
        guard case .object(let members)? = vectors,
            case .string(let text)? = members.first(where: { $0.key == key })?.value
        else { return [] }
        return hexBytes(text)
    }

    static func hexList(_ key: String) -> [[UInt8]] {
        guard case .object(let members)? = vectors,
            case .array(let items)? = members.first(where: { $0.key == key })?.value
        else { return [] }
        return items.compactMap { if case .string(let text) = $0 { hexBytes(text) } else { nil } }
    }

    static func hexBytes(_ text: String) -> [UInt8] { Hex.decode(text, separators: "") ?? [] }

    static let serverEphemeral: [UInt8] = hex("server_ephemeral_private")

    static func configuration(noise: Bool) -> APIServerConfiguration {
        APIServerConfiguration(
            host: "127.0.0.1", port: 0, encryption: noise ? .noise(psk: hex("psk")) : .plaintext, name: "fuzz",
            friendlyName: "Fuzz", macAddress: "AA:BB:CC:DD:EE:FF", bluetoothMacAddress: "AA:BB:CC:DD:EE:FF",
            version: "fuzz", maxClients: 4, connectionSlots: 3)
    }

    static func chunks(_ pieces: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        for piece in pieces {
            var rest = piece[...]
            while !rest.isEmpty {
                let part = rest.prefix(255)
                out.append(UInt8(part.count))
                out += part
                rest = rest.dropFirst(part.count)
            }
        }
        return out
    }

    static func plain(_ type: UInt16, _ payload: [UInt8] = []) -> [UInt8] {
        PlaintextFrameDecoder.encode(ServerMessage(type: type, payload: payload))
    }

    static func noiseFrame(_ body: [UInt8]) -> [UInt8] { NoiseFrameDecoder.encode(body) ?? [] }

    static let all: [[UInt8]] = {
        let hello: [UInt8] = [0x0A, 0x02, 0x48, 0x41, 0x10, 0x01, 0x18, 0x0A]
        let session = [
            plain(MessageType.helloRequest, hello), plain(MessageType.authenticationRequest),
            plain(MessageType.deviceInfoRequest), plain(MessageType.listEntitiesRequest),
            plain(MessageType.subscribeBluetoothLEAdvertisementsRequest, [0x08, 0x01]),
            plain(MessageType.subscribeBluetoothConnectionsFreeRequest), plain(MessageType.pingRequest),
            // Connects: V3 with cache and a random address type; the deprecated V1 connect and a V3
            // connect without an address type (both refused by the session, as ESPHome does).
            plain(MessageType.bluetoothDeviceRequest, [0x08, 0xFF, 0x01, 0x10, 0x04, 0x18, 0x01, 0x20, 0x01]),
            plain(MessageType.bluetoothDeviceRequest, [0x08, 0xFF, 0x01, 0x18, 0x01]),
            plain(MessageType.bluetoothDeviceRequest, [0x08, 0xFF, 0x01, 0x10, 0x05]),
            plain(MessageType.bluetoothScannerSetModeRequest, [0x08, 0x01]),
            plain(MessageType.deviceCapabilitiesRequest),
            plain(MessageType.bluetoothGATTGetServicesRequest, [0x08, 0x01]),
            plain(MessageType.bluetoothGATTWriteRequest, [0x08, 0x01, 0x10, 0x15, 0x18, 0x01, 0x22, 0x02, 0x68, 0x69]),
            plain(MessageType.bluetoothGATTNotifyRequest, [0x08, 0x01, 0x10, 0x0B, 0x18, 0x01]),
            plain(MessageType.bluetoothSetConnectionParamsRequest, [0x08, 0x01, 0x10, 0x06, 0x18, 0x0C]),
            // Every field, valid: 7.5–15 ms, latency 0, timeout 4 s.
            plain(
                MessageType.bluetoothSetConnectionParamsRequest,
                [0x08, 0x01, 0x10, 0x06, 0x18, 0x0C, 0x20, 0x00, 0x28, 0x90, 0x03]),
            plain(MessageType.noiseEncryptionSetKeyRequest, [0x0A, 0x02, 0x01, 0x02]),
            plain(MessageType.disconnectRequest),
        ]
        var seeds = [[0] + chunks(session), [0] + chunks([session.joined().map { $0 }])]
        seeds.append([2] + chunks(session))  // the same session with connections served
        seeds.append([0] + chunks([plain(MessageType.deviceInfoRequest)]))  // before hello
        // A password (never accepted: the session ends).
        seeds.append(
            [0]
                + chunks([
                    plain(MessageType.helloRequest, hello),
                    plain(MessageType.authenticationRequest, [0x0A, 0x01, 0x70]),
                ]))
        seeds.append([0] + chunks([[0x00, 0xFF, 0xFF, 0x03, 0x01]]))  // oversize
        let handshake = [noiseFrame([]), noiseFrame([0x00] + hex("client_handshake"))]
        let frames = hexList("to_server_cipher").map(noiseFrame)
        seeds.append([1] + chunks(handshake + frames))
        seeds.append([1] + chunks([noiseFrame([]), noiseFrame([0x00] + hex("client_handshake_wrong_psk"))]))
        seeds.append([1] + chunks([plain(MessageType.helloRequest, hello)]))
        seeds.append([MessageType.helloRequest.lowByte] + hello)
        // Keyless adoption: set-key requests (a key, the zero key, empty, too long, not base64) to
        // a Noise proxy with provisioning, and to an unprovisioned one that takes plaintext.
        let keyText = Array("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=".utf8)
        let setKeys = [
            keyText, Array("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".utf8), [], keyText + keyText,
            Array("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh*=".utf8),
        ].map { key in
            var writer = ProtobufWriter()
            writer.bytes(1, key, always: true)
            return plain(MessageType.noiseEncryptionSetKeyRequest, writer.bytes)
        }
        seeds.append([12] + chunks([plain(MessageType.helloRequest, hello)] + setKeys))
        seeds.append([6] + chunks([plain(MessageType.helloRequest, hello)] + setKeys))
        return seeds
    }()
}

extension UInt16 {
    fileprivate var lowByte: UInt8 { UInt8(truncatingIfNeeded: self) }
}
