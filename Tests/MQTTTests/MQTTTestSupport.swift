import EventLoop
import Foundation
import MQTT
import Synchronization
import TestSupport
import Testing

/// Collects values from another task, for assertions.
final class Collected<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
    var count: Int { values.withLock { $0.count } }
}

/// Waits until `condition` holds, polling every 10 ms; fails the test after `timeout` seconds.
func eventually(
    timeout: Double = defaultWait, _ what: @autoclosure () -> String = "condition",
    sourceLocation: SourceLocation = #_sourceLocation, _ condition: () async throws -> Bool
) async throws {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try await condition() { return }
        try await Task.sleep(nanoseconds: 10_000_000)
    }
    Issue.record("timed out after \(timeout) s waiting for \(what())", sourceLocation: sourceLocation)
    throw CancellationError()
}

/// Runs `body` with a deadline so a hung test fails instead of blocking the suite.
func withTimeout<T: Sendable>(_ seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            throw TimeoutError(seconds: seconds)
        }
        let result = try await group.next()!
        group.cancelAll()
        return result
    }
}

struct TimeoutError: Error, CustomStringConvertible {
    let seconds: Double
    var description: String { "timed out after \(seconds) s" }
}

extension MQTTConfiguration {
    /// A configuration for `url` with a unique client id and fast reconnects.
    static func test(_ url: String, _ name: String = "test", version: MQTTProtocolVersion = .v5) throws
        -> MQTTConfiguration
    {
        var configuration = try MQTTConfiguration(url: url, clientID: "\(name)-\(UUID().uuidString.prefix(8))")
        configuration.protocolVersion = version
        configuration.reconnect = MQTTReconnectPolicy(minimumDelay: 0.05, maximumDelay: 0.5, multiplier: 2, jitter: 0.2)
        return configuration
    }
}

/// Collects a subscription's messages in the background.
func collect(_ subscription: MQTTSubscription) -> (Collected<MQTTMessage>, Task<Void, Never>) {
    let collected = Collected<MQTTMessage>()
    let task = Task {
        for await message in subscription { collected.append(message) }
    }
    return (collected, task)
}
