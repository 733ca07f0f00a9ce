import EventLoop
import Gateway
import Synchronization

/// An MQTT port that records what the gateway publishes and lets tests inject inbound messages.
/// Deliveries are made on the calling thread (the gateway queues them to its loop); with
/// ``loop`` set, ``waitFor(_:count:timeout:)`` settles that loop instead of waiting on real time.
public final class InMemoryMQTT: MQTTPort {
    private struct State {
        var published: [MQTTOutboundMessage] = []
        var subscriptions: [UInt64: (filter: String, deliver: @Sendable (MQTTInboundMessage) -> Void)] = [:]
        var nextID: UInt64 = 0
        var connection: [@Sendable (Bool) -> Void] = []
        var loop: EventLoop?
        /// publishAndWait throws while set (the broker is unreachable).
        var failWaits = false
        var waitAttempts = 0
        var queueFullDrops = 0
        var backlog = 0
        var backlogLimit: Int?
        /// Completions of ``publish(_:completion:)`` kept back while set (the broker has not
        /// acknowledged), oldest first.
        var holdAcknowledgements = false
        var unacknowledged: [@Sendable (Bool) -> Void] = []
    }

    private let state = Mutex(State())

    public init() {}

    public var published: [MQTTOutboundMessage] { state.withLock { $0.published } }

    public func messages(on topic: String) -> [MQTTOutboundMessage] { published.filter { $0.topic == topic } }
    public func payloads(on topic: String) -> [String] { messages(on: topic).map(\.payloadText) }

    public func publish(_ message: MQTTOutboundMessage) {
        state.withLock { $0.published.append(message) }
    }

    /// Records the message and reports it delivered, unless ``failWaits(_:)`` makes it fail (the
    /// broker is unreachable: nothing recorded); with ``holdAcknowledgements(_:)`` the report
    /// waits for ``acknowledge(_:delivered:)``.
    public func publish(_ message: MQTTOutboundMessage, completion: @escaping @Sendable (Bool) -> Void) {
        let report: Bool? = state.withLock { state in
            state.waitAttempts += 1
            if state.failWaits { return false }
            state.published.append(message)
            guard !state.holdAcknowledgements else {
                state.unacknowledged.append(completion)
                return nil
            }
            return true
        }
        if let report { completion(report) }
    }

    /// Keeps the completions of ``publish(_:completion:)`` back (true), as a broker that does not
    /// acknowledge (frozen, or gone without the client noticing yet) would.
    public func holdAcknowledgements(_ hold: Bool) { state.withLock { $0.holdAcknowledgements = hold } }

    /// Completions kept back, not reported yet.
    public var unacknowledged: Int { state.withLock { $0.unacknowledged.count } }

    /// Reports the oldest `count` completions kept back: delivered (the broker acknowledged) or failed.
    public func acknowledge(_ count: Int = .max, delivered: Bool = true) {
        let due = state.withLock { state in
            let due = Array(state.unacknowledged.prefix(count))
            state.unacknowledged.removeFirst(due.count)
            return due
        }
        for completion in due { completion(delivered) }
    }

    /// The loop of the gateway under test: ``waitFor(_:count:timeout:)`` settles it.
    public var loop: EventLoop? {
        get { state.withLock { $0.loop } }
        set { state.withLock { $0.loop = newValue } }
    }

    /// Makes ``publish(_:completion:)`` fail (true) or deliver (false).
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

    public func subscribe(_ filter: String, _ deliver: @escaping @Sendable (MQTTInboundMessage) -> Void) throws
        -> PortRegistration
    {
        let id: UInt64 = state.withLock {
            $0.nextID += 1
            $0.subscriptions[$0.nextID] = (filter, deliver)
            return $0.nextID
        }
        return PortRegistration { [self] in _ = state.withLock { $0.subscriptions.removeValue(forKey: id) } }
    }

    public func connectionEvents(_ deliver: @escaping @Sendable (Bool) -> Void) {
        state.withLock { $0.connection.append(deliver) }
    }

    /// The filters subscribed now.
    public var filters: [String] { state.withLock { $0.subscriptions.sorted { $0.key < $1.key }.map(\.value.filter) } }

    /// Delivers `message` to every matching subscription, as a broker would.
    public func inject(_ message: MQTTInboundMessage) {
        let targets = state.withLock {
            $0.subscriptions.sorted { $0.key < $1.key }.map(\.value).filter { Self.matches($0.filter, message.topic) }
        }
        for target in targets { target.deliver(message) }
    }

    public func setConnected(_ connected: Bool) {
        for deliver in state.withLock({ $0.connection }) { deliver(connected) }
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

    /// The messages published on `topic` once the gateway settled (with ``loop`` set: every
    /// input queued so far and what it caused have run); without a loop, waits (real time,
    /// bounded by `timeout`) until there are `count`.
    @discardableResult
    public func waitFor(_ topic: String, count: Int = 1, timeout: Double = 5) async -> [MQTTOutboundMessage] {
        if let loop {
            await loop.settle()
            return messages(on: topic)
        }
        let deadline = ContinuousClock.now + .seconds(timeout)
        while ContinuousClock.now < deadline {
            let found = messages(on: topic)
            if found.count >= count { return found }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return messages(on: topic)
    }
}
