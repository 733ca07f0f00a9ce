#if canImport(Glibc)
    import Glibc
#endif

/// A one-shot ESPHome API client: connects, (with a key) does the Noise handshake, says Hello,
/// asks for DeviceInfo and disconnects. `gattway doctor` uses it to check the running proxy's
/// listener and key; the tests use it as a Noise client of the server. Blocking, bounded by
/// `timeout` per step.
public enum APIProbe {
    /// What the server said.
    public struct Answer: Sendable, Equatable {
        /// The node name of the Noise server hello (nil in plaintext).
        public var helloName: String?
        public var serverInfo: String
        public var apiVersion: (major: UInt32, minor: UInt32)
        public var name: String
        /// DeviceInfo's `mac_address` (`AA:BB:…`; gattway sends the adapter's).
        public var macAddress: String = ""
        public var bluetoothProxyFeatures: UInt32

        public static func == (lhs: Answer, rhs: Answer) -> Bool {
            lhs.helloName == rhs.helloName && lhs.serverInfo == rhs.serverInfo && lhs.apiVersion == rhs.apiVersion
                && lhs.name == rhs.name && lhs.macAddress == rhs.macAddress
                && lhs.bluetoothProxyFeatures == rhs.bluetoothProxyFeatures
        }
    }

    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// Nothing accepts connections there (connection refused, unreachable, timeout).
        case unreachable(String)
        /// The server refused the key (its rejection frame's text).
        case keyRefused(String)
        /// The server speaks the other framing (plaintext vs Noise).
        case wrongEncryption(String)
        /// Anything else: closed early, malformed answers.
        case protocolError(String)

        public var description: String {
            switch self {
            case .unreachable(let text): "unreachable: \(text)"
            case .keyRefused(let text): "key refused: \(text)"
            case .wrongEncryption(let text): text
            case .protocolError(let text): text
            }
        }
    }

    /// Probes `host`:`port`; `psk` nil: plaintext.
    public static func run(host: String, port: UInt16, psk: [UInt8]?, timeout: Double) -> Result<Answer, Failure> {
        let connection: Connection
        switch Connection.open(host: host, port: port, timeout: timeout) {
        case .success(let opened): connection = opened
        case .failure(let failure): return .failure(failure)
        }
        defer { close(connection.fd) }
        var session = ClientSide(connection: connection, psk: psk)
        do {
            return .success(try session.run())
        } catch {
            return .failure(error)
        }
    }

    /// A session kept open (the tests' Noise client): the handshake and hello done by ``open``.
    package struct Session {
        var side: ClientSide

        package static func open(host: String, port: UInt16, psk: [UInt8]?, timeout: Double) -> Result<Session, Failure>
        {
            switch Connection.open(host: host, port: port, timeout: timeout) {
            case .failure(let failure): return .failure(failure)
            case .success(let connection):
                var side = ClientSide(connection: connection, psk: psk)
                do {
                    _ = try side.start()
                } catch {
                    Glibc.close(connection.fd)
                    return .failure(error)
                }
                return .success(Session(side: side))
            }
        }

        /// NoiseEncryptionSetKeyRequest with `key` (the text as sent); the answer's `success`.
        package mutating func setKey(_ key: [UInt8]) throws(Failure) -> Bool {
            var writer = ProtobufWriter()
            writer.bytes(1, key)
            try side.send(ServerMessage(type: MessageType.noiseEncryptionSetKeyRequest, payload: writer.bytes))
            return try Self.bool(1, in: side.nextMessage(MessageType.noiseEncryptionSetKeyResponse))
        }

        /// DeviceInfo's `api_encryption_supported` and `api_encryption_provisionable`.
        package mutating func encryption() throws(Failure) -> (supported: Bool, provisionable: Bool) {
            try side.send(.empty(MessageType.deviceInfoRequest))
            let info = try side.nextMessage(MessageType.deviceInfoResponse)
            return (try Self.bool(19, in: info), try Self.bool(26, in: info))
        }

        /// Waits for the server's DisconnectRequest (true) or the end of the connection (false).
        package mutating func disconnectRequested() -> Bool {
            do {
                _ = try side.nextMessage(MessageType.disconnectRequest)
                return true
            } catch {
                return error == .protocolError("the server disconnected")
            }
        }

        package func close() { Glibc.close(side.connection.fd) }

        static func bool(_ number: UInt32, in payload: [UInt8]) throws(Failure) -> Bool {
            var reader = ProtobufReader(payload[...])
            var result = false
            do {
                while let (field, value) = try reader.next() {
                    if field == number { result = try value.bool(field: field) }
                }
            } catch {
                throw .protocolError("malformed answer: \(error)")
            }
            return result
        }
    }

    struct Connection {
        let fd: Int32

        static func open(host: String, port: UInt16, timeout: Double) -> Result<Connection, Failure> {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { return .failure(.unreachable(String(cString: strerror(errno)))) }
            // A NaN timeout becomes 1 s; others are held within 1 ms … 1 h.
            let whole = timeout.isNaN ? 1 : max(0.001, min(timeout, 3600))
            let seconds = Int(exactly: whole.rounded(.towardZero)) ?? 1
            let micros = Int(exactly: ((whole - whole.rounded(.towardZero)) * 1e6).rounded(.down)) ?? 0
            var interval = timeval(tv_sec: seconds, tv_usec: micros)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
                close(fd)
                return .failure(.unreachable("\(host) is not an IPv4 address"))
            }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                let text = String(cString: strerror(errno))
                close(fd)
                return .failure(.unreachable(text))
            }
            return .success(Connection(fd: fd))
        }

        func send(_ bytes: [UInt8]) -> Bool {
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeBytes {
                    Glibc.send(fd, $0.baseAddress.map { $0 + offset }, bytes.count - offset, Int32(MSG_NOSIGNAL))
                }
                guard written > 0 else { return false }
                offset += written
            }
            return true
        }

        /// Up to 4 KiB; empty when the peer closed or the timeout passed.
        func receive() -> [UInt8] {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            return count > 0 ? Array(buffer[0..<count]) : []
        }
    }

    /// The client's half of a session.
    struct ClientSide {
        let connection: Connection
        let psk: [UInt8]?
        var plain = PlaintextFrameDecoder(maxPayload: 1 << 16)
        var noise = NoiseFrameDecoder(maxFrame: 0xFFFF)
        var ciphers: (send: NoiseCipher, receive: NoiseCipher)?

        init(connection: Connection, psk: [UInt8]?) {
            self.connection = connection
            self.psk = psk
        }

        mutating func run() throws(Failure) -> Answer {
            let (helloName, helloResponse) = try start()
            try send(.empty(MessageType.deviceInfoRequest))
            let info = try nextMessage(MessageType.deviceInfoResponse)
            try? send(.empty(MessageType.disconnectRequest))
            var answer = Answer(
                helloName: helloName, serverInfo: "", apiVersion: (0, 0), name: "", bluetoothProxyFeatures: 0)
            do {
                var reader = ProtobufReader(helloResponse)
                while let (field, value) = try reader.next() {
                    switch field {
                    case 1: answer.apiVersion.major = try value.uint32(field: field)
                    case 2: answer.apiVersion.minor = try value.uint32(field: field)
                    case 3: answer.serverInfo = try value.string(field: field)
                    default: break
                    }
                }
                reader = ProtobufReader(info)
                while let (field, value) = try reader.next() {
                    if field == 2 { answer.name = try value.string(field: field) }
                    if field == 3 { answer.macAddress = try value.string(field: field) }
                    if field == 15 { answer.bluetoothProxyFeatures = try value.uint32(field: field) }
                }
            } catch {
                throw .protocolError("malformed answer: \(error)")
            }
            return answer
        }

        /// The handshake (with a key) and the hello: the node name of the server hello and the
        /// HelloResponse's payload.
        mutating func start() throws(Failure) -> (helloName: String?, helloResponse: [UInt8]) {
            var helloName: String?
            if let psk {
                guard var handshake = NoiseHandshake(psk: psk), let message = handshake.writeClientMessage(),
                    let hello = NoiseFrameDecoder.encode([]), let first = NoiseFrameDecoder.encode([0x00] + message)
                else { throw .protocolError("the Noise handshake could not be made") }
                guard connection.send(hello + first) else { throw .protocolError("the server closed the connection") }
                let serverHello = try nextNoiseFrame()
                guard serverHello.first == 0x01 else {
                    throw .protocolError("server hello chose protocol \(serverHello.first ?? 0)")
                }
                helloName = serverHello.dropFirst().split(separator: 0, omittingEmptySubsequences: false).first
                    .map { String(decoding: $0, as: UTF8.self) }
                let answer = try nextNoiseFrame()
                guard answer.first == 0x00 else {
                    throw .keyRefused(String(decoding: answer.dropFirst(), as: UTF8.self))
                }
                guard let ciphers = handshake.readServerMessage(answer.dropFirst()) else {
                    throw .keyRefused("the server's handshake does not authenticate")
                }
                self.ciphers = ciphers
            }
            var hello = ProtobufWriter()
            hello.string(1, "gattway doctor")
            hello.uint32(2, 1)
            hello.uint32(3, 10)
            try send(ServerMessage(type: MessageType.helloRequest, payload: hello.bytes))
            return (helloName, try nextMessage(MessageType.helloResponse))
        }

        mutating func send(_ message: ServerMessage) throws(Failure) {
            let bytes: [UInt8]
            if var ciphers {
                let count = message.payload.count
                let plaintext =
                    [
                        UInt8(truncatingIfNeeded: message.type >> 8), UInt8(truncatingIfNeeded: message.type),
                        UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count),
                    ] + message.payload
                guard let sealed = ciphers.send.encrypt(plaintext), let frame = NoiseFrameDecoder.encode(sealed) else {
                    throw .protocolError("a message could not be encrypted")
                }
                self.ciphers = ciphers
                bytes = frame
            } else {
                bytes = PlaintextFrameDecoder.encode(message)
            }
            guard connection.send(bytes) else { throw .protocolError("the server closed the connection") }
        }

        mutating func nextNoiseFrame() throws(Failure) -> [UInt8] {
            while true {
                do {
                    if let frame = try noise.next() { return frame }
                } catch {
                    if case .badPreamble(0) = error {
                        throw .wrongEncryption("the server speaks plaintext (no encryption_key there)")
                    }
                    throw .protocolError("\(error)")
                }
                let bytes = connection.receive()
                guard !bytes.isEmpty else { throw .protocolError("the server closed the connection or did not answer") }
                noise.append(bytes)
            }
        }

        /// The next message of type `type`, skipping others (a subscription's traffic, pings).
        mutating func nextMessage(_ type: UInt16) throws(Failure) -> [UInt8] {
            while true {
                let (received, payload): (UInt16, [UInt8])
                if ciphers != nil {
                    let frame = try nextNoiseFrame()
                    guard var ciphers, let plain = ciphers.receive.decrypt(frame[...]), plain.count >= 4 else {
                        throw .protocolError("a frame from the server does not decrypt")
                    }
                    self.ciphers = ciphers
                    received = UInt16(plain[0]) << 8 | UInt16(plain[1])
                    payload = Array(plain.dropFirst(4))
                } else {
                    do {
                        if let frame = try plain.next() {
                            (received, payload) = frame
                        } else {
                            let bytes = connection.receive()
                            guard !bytes.isEmpty else {
                                throw Failure.protocolError("the server closed the connection or did not answer")
                            }
                            plain.append(bytes)
                            continue
                        }
                    } catch let error as Failure {
                        throw error
                    } catch FrameError.badPreamble(1) {
                        throw .wrongEncryption("the server expects Noise encryption (set encryption_key)")
                    } catch {
                        throw .protocolError("\(error)")
                    }
                }
                if received == type { return payload }
                if received == MessageType.disconnectRequest { throw .protocolError("the server disconnected") }
            }
        }
    }
}
