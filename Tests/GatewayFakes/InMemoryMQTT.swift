import Gateway
import Synchronization

/// An MQTT port that records what the gateway publishes and lets tests inject inbound messages.
public final class InMemoryMQTT: MQTTPort {
    private struct State {
        var published: [MQTTOutboundMessage] = []
        var subscriptions: [(filter: String, continuation: AsyncStream<MQTTInboundMessage>.Continuation)] = []
        var connection: [AsyncStream<Bool>.Continuation] = []
        /// publishAndWait throws while set (the broker is unreachable).
        var failWaits = false
        var waitAttempts = 0
        var queueFullDrops = 0
        var backlog = 0
        var backlogLimit: Int?
    }

    private let state = Mutex(State())

    public init() {}

    public var published: [MQTTOutboundMessage] { state.withLock { $0.published } }

    public func messages(on topic: String) -> [MQTTOutboundMessage] { published.filter { $0.topic == topic } }
    public func payloads(on topic: String) -> [String] { messages(on: topic).map(\.payloadText) }
    public var filters: [String] { state.withLock { $0.subscriptions.map(\.filter) } }

    public func publish(_ message: MQTTOutboundMessage) {
        state.withLock { $0.published.append(message) }
    }

    public func publishAndWait(_ message: MQTTOutboundMessage) async throws {
        let fail = state.withLock { state in
            state.waitAttempts += 1
            if !state.failWaits { state.published.append(message) }
            return state.failWaits
        }
        if fail { throw CancellationError() }
    }

    /// Makes ``publishAndWait(_:)`` fail (true) or deliver (false).
    public func failWaits(_ fail: Bool) { state.withLock { $0.failWaits = fail } }
    public var waitAttempts: Int { state.withLock { $0.waitAttempts } }

    /// What the client reports as refused because its queue was full.
    public var queueFullDrops: Int {
        get { state.withLock { $0.queueFullDrops } }
        set { state.withLock { $0.queueFullDrops = newValue } }
    }

    /// What the client reports as held unacknowledged, and its bound (flow control).
    public var backlog: Int {
        get { state.withLock { $0.backlog } }
        set { state.withLock { $0.backlog = newValue } }
    }

    public var backlogLimit: Int? {
        get { state.withLock { $0.backlogLimit } }
        set { state.withLock { $0.backlogLimit = newValue } }
    }

    public func subscribe(_ filter: String) async throws -> AsyncStream<MQTTInboundMessage> {
        let (stream, continuation) = AsyncStream.makeStream(of: MQTTInboundMessage.self)
        state.withLock { $0.subscriptions.append((filter, continuation)) }
        return stream
    }

    public func connectionEvents() -> AsyncStream<Bool> {
        let (stream, continuation) = AsyncStream.makeStream(of: Bool.self)
        state.withLock { $0.connection.append(continuation) }
        return stream
    }

    /// Delivers `message` to every matching subscription, as a broker would.
    public func inject(_ message: MQTTInboundMessage) {
        let targets = state.withLock { $0.subscriptions.filter { Self.matches($0.filter, message.topic) } }
        for target in targets { target.continuation.yield(message) }
    }

    public func setConnected(_ connected: Bool) {
        for continuation in state.withLock({ $0.connection }) { continuation.yield(connected) }
    }

    public func clear() { state.withLock { $0.published = [] } }

    public static func matches(_ filter: String, _ topic: String) -> Bool {
        let f = filter.split(separator: "/", omittingEmptySubsequences: false)
        let t = topic.split(separator: "/", omittingEmptySubsequences: false)
        for (index, level) in f.enumerated() {
            if level == "#" { return true }
            guard index < t.count else { return false }
            if level != "+" && level != t[index] { return false }
        }
        return f.count == t.count
    }

    /// Waits (real time, bounded) until `count` messages were published on `topic`.
    @discardableResult
    public func waitFor(_ topic: String, count: Int = 1, timeout: Double = 5) async -> [MQTTOutboundMessage] {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while ContinuousClock.now < deadline {
            let found = messages(on: topic)
            if found.count >= count { return found }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return messages(on: topic)
    }
}
