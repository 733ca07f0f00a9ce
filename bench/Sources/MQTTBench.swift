import EventLoop
import Foundation
import MQTT
import Synchronization

/// Publishes/s of the `MQTT` client to a private local mosquitto it starts itself
/// (`gattway-bench run mqtt`). Publishes are submitted on the loop thread (as the gateway does)
/// and counted when the client reports them complete: QoS 0 written, QoS 1 PUBACKed.
enum MQTTBench: BenchSuite {
    static var name: String { "mqtt" }

    static func run() async throws -> [BenchRow] {
        let broker = try LocalBroker()
        defer { broker.stop() }
        let loop = EventLoop(name: "bench-mqtt")
        defer { loop.shutdown() }
        var rows: [BenchRow] = []
        let cases: [(MQTTQoS, Int, String)] = [(.atMostOnce, 500_000, "≥ 250000"), (.atLeastOnce, 200_000, "≥ 70000")]
        for (qos, count, target) in cases {
            var configuration = try MQTTConfiguration(url: "mqtt://127.0.0.1:\(broker.port)", clientID: "bench-\(qos.rawValue)")
            configuration.maxInflight = 1000
            configuration.protocolVersion = .v311
            let client = try MQTTClient(configuration: configuration, loop: loop)
            try await client.connect()
            let payload = Array(#"{"temperature":21.5,"humidity":48,"battery":97,"rssi":-67}"#.utf8)  // 58 bytes, a typical state message
            let seconds = try await measure(client: client, loop: loop, qos: qos, count: count, payload: payload)
            await client.disconnect()
            rows.append(BenchRow(
                name: "MQTT publishes, \(qos), to local mosquitto", value: Double(count) / seconds, unit: "msgs/s",
                target: target,
                detail: "\(count) × \(payload.count) B, counted on completion\(qos == .atMostOnce ? " (written)" : " (PUBACK)"), max in-flight 1000, MQTT 3.1.1"))
        }
        return rows
    }

    private static func measure(client: MQTTClient, loop: EventLoop, qos: MQTTQoS, count: Int, payload: [UInt8]) async throws -> Double {
        let tally = Tally()
        let start = EventLoop.now()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            loop.execute {
                let message = MQTTMessage(topic: "bench/qos\(qos.rawValue)", payload: payload, qos: qos)
                for _ in 0..<count {
                    client.publish(message) { result in
                        if tally.record(failed: (try? result.get()) == nil) == count {
                            continuation.resume()
                        }
                    }
                }
            }
        }
        let seconds = Double(EventLoop.now() - start) / 1e9
        let failures = tally.failures
        if failures > 0 { throw BenchError("\(failures) of \(count) \(qos) publishes failed") }
        return seconds
    }
}

/// Completion counts shared with the loop thread.
private final class Tally: Sendable {
    private let counts = Mutex<(done: Int, failed: Int)>((0, 0))
    /// Counts one completion; returns how many completed so far.
    func record(failed: Bool) -> Int {
        counts.withLock {
            $0.done += 1
            if failed { $0.failed += 1 }
            return $0.done
        }
    }
    var failures: Int { counts.withLock { $0.failed } }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A mosquitto on a free loopback port with a generated config, stopped by ``stop()``.
private final class LocalBroker {
    let port: UInt16
    private let process = Process()

    init() throws {
        port = try Self.freePort()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("gattway-bench-mosquitto-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let user = String(cString: getpwuid(getuid()).pointee.pw_name)
        let config = """
            user \(user)
            listener \(port) 127.0.0.1
            allow_anonymous true
            persistence false
            max_queued_messages 0
            max_inflight_messages 0
            log_dest none
            """
        let path = dir.appendingPathComponent("mosquitto.conf").path
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: FileManager.default.isExecutableFile(atPath: "/usr/sbin/mosquitto") ? "/usr/sbin/mosquitto" : "/usr/bin/mosquitto")
        process.arguments = ["-c", path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<500 {
            if Self.accepts(port) { return }
            usleep(10_000)
        }
        stop()
        throw BenchError("mosquitto did not start on port \(port)")
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)  // nothing to save; SIGTERM may be blocked in children
        process.waitUntilExit()
    }

    private static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { throw BenchError("no free port: errno \(errno)") }
        return UInt16(bigEndian: address.sin_port)
    }

    private static func accepts(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
