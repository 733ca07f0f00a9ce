import Foundation
import JSON
import MQTT
import Synchronization

/// Every MQTT message an observing client received, in arrival order, with ways to wait for the
/// one a test expects (the wait fails the test with what did arrive when the timeout passes).
final class MessageRecorder: Sendable {
    /// One received message and when it arrived (seconds on the monotonic clock).
    struct Received: Sendable {
        var message: MQTTMessage
        var arrival: Double

        var topic: String { message.topic }
        var text: String { message.payloadString }
        /// The payload as JSON, nil when it is not JSON.
        var json: JSONValue? { try? JSONValue.parse(message.payload) }
        /// A number member of a JSON object payload.
        func number(_ key: String) -> Double? {
            if case .number(let value)? = json?[key] { return value }
            return nil
        }
        /// A string member of a JSON object payload.
        func string(_ key: String) -> String? {
            if case .string(let value)? = json?[key] { return value }
            return nil
        }
    }

    private let received = Mutex<[Received]>([])

    /// Appends a message (called from the subscription's task).
    func record(_ message: MQTTMessage) {
        let entry = Received(message: message, arrival: Self.now())
        received.withLock { $0.append(entry) }
    }

    /// Everything so far.
    var all: [Received] { received.withLock { $0 } }

    /// Everything so far on `topic`.
    func messages(on topic: String) -> [Received] { all.filter { $0.topic == topic } }

    /// Waits until `count` messages recorded at or after position `start` satisfy `predicate`
    /// and returns them; throws with the latest recorded messages when they do not arrive
    /// within `timeout` seconds.
    @discardableResult
    func wait(
        for what: String, count: Int = 1, after start: Int = 0, timeout: Double = 60,
        _ predicate: @escaping @Sendable (Received) -> Bool
    ) async throws -> [Received] {
        try await poll(what, timeout: timeout) { snapshot in
            let matching = snapshot.dropFirst(start).filter(predicate)
            return matching.count >= count ? matching : nil
        }
    }

    /// Waits for the first message on `topic` satisfying `predicate` among those recorded at or
    /// after position `start` (take ``count`` before an action to see only what it caused).
    @discardableResult
    func next(
        on topic: String, after start: Int = 0, timeout: Double = 60,
        where predicate: @escaping @Sendable (Received) -> Bool = { _ in true }
    ) async throws -> Received {
        try await poll("a message on \(topic) after #\(start)", timeout: timeout) { snapshot in
            snapshot.dropFirst(start).first { $0.topic == topic && predicate($0) }
        }
    }

    /// How many messages were recorded so far.
    var count: Int { received.withLock { $0.count } }

    private func poll<T>(_ what: String, timeout: Double, _ check: ([Received]) -> T?) async throws -> T {
        let deadline = Self.now() + timeout
        while true {
            let snapshot = all
            if let result = check(snapshot) { return result }
            if Self.now() >= deadline {
                let summary = snapshot.suffix(40).map { "\($0.topic) \($0.text.prefix(200))" }.joined(separator: "\n  ")
                throw RecorderTimeout(description: "no \(what) within \(timeout) s; last messages:\n  \(summary)")
            }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
    }

    /// Seconds on the monotonic clock.
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

/// A message a test waited for did not arrive in time.
struct RecorderTimeout: Error, CustomStringConvertible {
    let description: String
}
