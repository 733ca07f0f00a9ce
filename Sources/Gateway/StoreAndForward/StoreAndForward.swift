import JSON
import Synchronization

/// The stage between the gateway and the ``MQTTPort`` that keeps messages while the broker is
/// unreachable and replays them, in order, after the reconnect (docs/operations.md).
///
/// Modes, switched only under the lock, so every message is decided exactly once:
/// - **live** (connected, queue empty): messages go to ``MQTTPort/publish(_:)``.
/// - **offline** (after ``connectionChanged(_:)`` `false`): messages are appended to the
///   ``DiskQueue`` (QoS 0 and republished/snapshot messages are dropped and counted).
/// - **replaying** (connected, queue not empty): one task hands the oldest message to
///   ``MQTTPort/publishAndWait(_:)`` and removes it from the queue only when that returns
///   (PUBACK at QoS 1); new messages are appended behind the queue, so order holds. A failed
///   hand-off keeps the message for the next attempt; a message the connected broker refuses
///   three times is dropped (``Statistics/rejected``). A crash between the PUBACK and the
///   removal replays that one message again after the restart (QoS 1 is at least once).
///
/// Flow control (a broker slower than the readings): while connected and live, a stored
/// message that would take the port's ``MQTTPort/backlog`` to its ``MQTTPort/backlogLimit``
/// (`mqtt.max_queued`) is not handed over but queued, and the stage replays — the same mode as
/// after an outage. Everything handed over earlier is ahead of it in the client, everything
/// later behind it in the queue, so order holds and the client never refuses a reading; the
/// queue's own bounds (`max_messages`, `max_bytes`) are then what limits a burst.
///
/// Replays go out in batches (``MQTTPort/publishInOrder(_:)``: up to ``replayBatch`` at once,
/// removed from the queue as they are acknowledged), so they run at the broker's
/// acknowledgement rate. A batch in flight is pinned in the queue (``DiskQueue/pinned``):
/// readings queued behind it meanwhile do not push it out, so a message is never both
/// delivered and counted as dropped; the bounds apply again once the batch is done.
///
/// With a queue file, the queue holds only where each message is in the file; each batch is
/// read back from it (``DiskQueue/oldest(_:)``), so a burst or an outage costs disk, not memory.
///
/// A queue file that cannot be written (disk full, read-only, I/O error; ``DiskQueue/fileFailure``)
/// is an episode: its first failure is logged once, with what it means (the queue is kept in
/// memory only, within its bounds), and every ``retryInterval`` seconds the stage tries the file
/// again (``DiskQueue/retryFile()``: every queued message rewritten to a fresh file) until it
/// takes the queue, which is logged once too. ``Statistics/durable`` says which it is.
///
/// Replayed messages carry ``MQTTOutboundMessage/capturedAt``. The gateway never waits for
/// this stage: ``publish(_:kind:)`` only appends to memory and one `write(2)`.
public final class StoreAndForward: Sendable {
    /// What the stage did so far (for `bridge/health`).
    public struct Statistics: Sendable, Equatable {
        /// Messages waiting now.
        public var depth = 0
        public var bytes = 0
        /// Messages that went into the queue.
        public var queued = 0
        /// Of those, queued while the broker was connected: because it was behind (flow
        /// control) or behind a replay already running.
        public var spilled = 0
        /// Messages delivered from the queue.
        public var replayed = 0
        /// Dropped to stay within max_messages/max_bytes.
        public var droppedFull = 0
        /// Dropped as older than max_age.
        public var droppedExpired = 0
        /// Dropped because their record could no longer be read back from the queue file.
        public var droppedUnreadable = 0
        /// QoS 0 messages dropped while offline.
        public var droppedQoS0 = 0
        /// Refused three times by a connected broker.
        public var rejected = 0
        /// Torn/corrupt bytes discarded when the queue file was opened.
        public var discardedBytes = 0
        /// Failed attempts to change the queue file (``DiskQueue/writeErrors``).
        public var writeErrors = 0
        /// Every queued message is in the queue file and the file took the last change: false
        /// without a state directory and while the file cannot be written.
        public var durable = false
        /// Messages kept only in memory (lost if the process stops).
        public var memoryOnly = 0
        /// Bytes free on the state directory's file system (nil without one).
        public var freeBytes: Int?
    }

    /// Seconds between two attempts to write a queue file that could not be written.
    public static let retryInterval = 5.0

    private struct State {
        var queue: DiskQueue
        var connected = true
        var replaying = false
        var statistics = Statistics()
        var attempts = 0
        /// When the queue file's current failure episode began (``clock`` time); nil: none.
        var failingSince: Double?
    }

    private let state: Mutex<State>
    private let mqtt: any MQTTPort
    private let clock: any GatewayClock
    private let settings: StoreAndForwardSettings
    private let log: GatewayLogger
    private let queuePath: String?

    /// - Parameter queue: the queue (file-backed or memory only); the stage owns it from now on.
    public init(queue: sending DiskQueue, mqtt: any MQTTPort, clock: any GatewayClock, settings: StoreAndForwardSettings,
                logger: GatewayLogger = .none) {
        queuePath = queue.path
        var initial = State(queue: queue)
        initial.statistics.discardedBytes = queue.discardedBytes
        let failure = Self.newFailure(&initial, now: clock.now())
        state = Mutex(initial)
        self.mqtt = mqtt
        self.clock = clock
        self.settings = settings
        self.log = logger
        if let failure { failed(failure) }
    }

    /// The counters, with the queue's current depth.
    public var statistics: Statistics {
        var statistics = state.withLock { state in
            var statistics = state.statistics
            statistics.depth = state.queue.count
            statistics.bytes = state.queue.bytes
            statistics.droppedFull = state.queue.drops.full
            statistics.droppedExpired = state.queue.drops.expired
            statistics.droppedUnreadable = state.queue.drops.unreadable
            statistics.writeErrors = state.queue.writeErrors
            statistics.durable = state.queue.isDurable
            statistics.memoryOnly = state.queue.memoryOnlyCount
            return statistics
        }
        statistics.freeBytes = queuePath.flatMap(DiskQueue.freeBytes(besides:))
        return statistics
    }

    // MARK: The queue file's failure episodes

    /// The queue file's failure that began an episode just now (the queue noted it during the
    /// last operation), marking the episode begun; nil when there is none or it was known.
    private static func newFailure(_ state: inout State, now: Double) -> DiskQueue.FileFailure? {
        guard state.failingSince == nil, let failure = state.queue.fileFailure else { return nil }
        state.failingSince = now
        return failure
    }

    /// Logs the start of an episode and tries the file again every ``retryInterval`` until it
    /// takes the queue (one such task per episode; it ends with the episode or the stage).
    private func failed(_ failure: DiskQueue.FileFailure) {
        log(.error, "store-and-forward: \(failure): queue kept in memory only (lost if gattway stops), bounded by "
            + "max_messages \(settings.maxMessages) and max_bytes \(settings.maxBytes); trying the file again every "
            + "\(Int(saturating: Self.retryInterval)) s")
        let clock = self.clock
        Task { [weak self] in
            while true {
                do { try await clock.sleep(until: clock.now() + Self.retryInterval) } catch { return }
                guard let self else { return }
                if self.retryFile() { return }
            }
        }
    }

    /// One attempt to end the failure episode; true when it is over (logged) or none is on.
    @discardableResult
    func retryFile() -> Bool {
        enum Outcome {
            case noEpisode, stillFailing
            case recovered(moved: Int, seconds: Double)
        }
        let now = clock.now()
        let outcome: Outcome = state.withLock { state in
            guard let since = state.failingSince else { return .noEpisode }
            let moved = state.queue.memoryOnlyCount
            guard state.queue.retryFile() else { return .stillFailing }
            state.failingSince = nil
            return .recovered(moved: moved, seconds: now - since)
        }
        switch outcome {
        case .noEpisode: return true
        case .stillFailing: return false
        case .recovered(let moved, let seconds):
            log(.notice, "store-and-forward: writing the queue file \(queuePath ?? "") again after "
                + "\(Int(saturating: seconds.rounded())) s: \(moved) messages moved from memory into it")
            return true
        }
    }

    /// Hands `message` to the port (live) or queues it.
    func publish(_ message: MQTTOutboundMessage, kind: OutboundKind) {
        let now = clock.wallMilliseconds()
        var startReplay = false
        var failure: DiskQueue.FileFailure?
        let live: Bool = state.withLock { state in
            if state.connected && !state.replaying {
                // Flow control: the client holds half its bound → readings wait here, in order.
                guard kind == .stored, message.qos > 0, let limit = mqtt.backlogLimit, mqtt.backlog >= limit / 2 else {
                    return true
                }
                state.replaying = true
                startReplay = true
                state.statistics.spilled += 1
            } else if state.connected && kind == .stored {
                state.statistics.spilled += 1
            }
            // During a replay only stored messages wait behind it (their order matters);
            // republished retained state and snapshots go out at once and never take a place in
            // the bounded queue (they would push out readings captured during the outage).
            if state.connected && kind != .stored { return true }
            if !state.connected {
                if kind != .stored { return false }
                if message.qos == 0 && !settings.queueQoS0 {
                    state.statistics.droppedQoS0 += 1
                    return false
                }
            }
            state.queue.append(message, capturedAt: message.capturedAt ?? now, now: now)
            state.statistics.queued += 1
            failure = Self.newFailure(&state, now: clock.now())
            return false
        }
        if let failure { failed(failure) }
        if live {
            // Only replayed messages say when they were captured.
            var outgoing = message
            outgoing.capturedAt = nil
            mqtt.publish(outgoing)
        }
        if startReplay {
            log(.info, "store-and-forward: the broker is behind (\(mqtt.backlog) messages unacknowledged): queueing readings in order")
            Task { await self.replay() }
        }
    }

    /// Most messages one replay step hands to the port at once: the port's backlog limit
    /// leaves room for them (half of `mqtt.max_queued`, at most 1,000, at least 1).
    var replayBatch: Int { max(1, min(1_000, (mqtt.backlogLimit ?? 2_000) / 2)) }

    /// The port's connection changed: `false` switches to offline, `true` starts the replay
    /// (or goes live when nothing is queued).
    public func connectionChanged(_ connected: Bool) {
        let startReplay: Bool = state.withLock { state in
            state.connected = connected
            guard connected, !state.replaying, !state.queue.isEmpty else { return false }
            state.replaying = true
            return true
        }
        if startReplay {
            log(.notice, "MQTT connected: replaying \(statistics.depth) queued messages")
            Task { await self.replay() }
        }
    }

    /// Replays until the queue is empty or the connection is lost: a batch at a time, each
    /// message removed once acknowledged. After a failure the acknowledged prefix is removed and
    /// the rest goes again (a message the connected broker refuses three times is dropped).
    private func replay() async {
        while true {
            let now = clock.wallMilliseconds()
            let batchSize = replayBatch
            var failure: DiskQueue.FileFailure?
            let (batch, unreadable): ([QueuedMessage]?, Int) = state.withLock { state in
                defer { failure = Self.newFailure(&state, now: clock.now()) }
                state.queue.dropExpired(now: now)
                let unreadableBefore = state.queue.drops.unreadable
                let batch = state.connected ? state.queue.oldest(batchSize) : []
                let unreadable = state.queue.drops.unreadable - unreadableBefore
                guard !batch.isEmpty else {
                    state.replaying = false
                    return (nil, unreadable)
                }
                state.queue.pinned = batch.count
                return (batch, unreadable)
            }
            if let failure { failed(failure) }
            if unreadable > 0 {
                log(.error, "store-and-forward: \(unreadable) queued messages could not be read back from \(queuePath ?? "the queue file") and were dropped")
            }
            guard let batch else { return }
            let results = await mqtt.publishInOrder(batch.map { queued in
                var message = queued.message
                message.capturedAt = queued.capturedAt
                return message
            })
            let failed = batch.indices.first { !results[$0] }
            var fileFailure: DiskQueue.FileFailure?
            let (stillConnected, gaveUp): (Bool, Bool) = state.withLock { state in
                defer { fileFailure = Self.newFailure(&state, now: clock.now()) }
                for queued in batch[..<(failed ?? batch.count)] where state.queue.remove(queued.sequence) {
                    state.statistics.replayed += 1
                }
                state.queue.pinned = 0
                guard failed != nil else {
                    state.attempts = 0
                    return (state.connected, false)
                }
                state.attempts += 1
                guard state.connected, state.attempts >= 3 else { return (state.connected, false) }
                state.attempts = 0
                if let first = state.queue.firstSequence, state.queue.remove(first) { state.statistics.rejected += 1 }
                return (true, true)
            }
            if let fileFailure { self.failed(fileFailure) }
            if let failed, gaveUp {
                log(.warning, "store-and-forward: \(batch[failed].message.topic) refused 3 times, dropped")
            } else if failed != nil, stillConnected {
                try? await clock.sleep(until: clock.now() + 1)
            }
        }
    }
}
