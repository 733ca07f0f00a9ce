import EventLoop

/// The stage between the gateway and the ``MQTTPort`` that keeps messages while the broker is
/// unreachable and replays them, in order, after the reconnect (docs/operations.md).
///
/// Modes (the stage runs on the event loop's thread with the rest of the core, so every message
/// is decided exactly once, in the order it came):
/// - **live** (connected, queue empty): messages go to ``MQTTPort/publish(_:)``.
/// - **offline** (after ``connectionChanged(_:)`` `false`): messages are appended to the
///   ``DiskQueue`` (QoS 0 and republished/snapshot messages are dropped and counted).
/// - **replaying** (connected, queue not empty): the oldest messages go to the port and each is
///   removed from the queue only when the port reports it delivered (PUBACK at QoS 1); new
///   messages are appended behind the queue, so order holds. A failed hand-off keeps the
///   message for the next attempt (a second later); a message the connected broker refuses
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
/// Replays go out in batches (``MQTTPort/publishInOrder(_:completion:)``: up to ``replayBatch``
/// at once, removed from the queue as they are acknowledged), so they run at the broker's
/// acknowledgement rate; the port's completion comes back to the core as an event
/// (``CoreEvent/replayed(_:)``), no task waits for it. A batch in flight is pinned in the queue (``DiskQueue/pinned``):
/// readings queued behind it meanwhile do not push it out, so a message is never both
/// delivered and counted as dropped; the bounds apply again once the batch is done.
///
/// With a queue file, the queue holds only where each message is in the file; each batch is
/// read back from it (``DiskQueue/oldest(_:)``), so a burst or an outage costs disk, not memory.
///
/// A queue file that cannot be written (disk full, read-only, I/O error; ``DiskQueue/fileFailure``)
/// is an episode: its first failure is logged once, with what it means (the queue is kept in
/// memory only, within its bounds), and every ``retryInterval`` seconds (a clock timer whose
/// firing comes back to the core as ``CoreEvent/queueFileRetry``) the stage tries the file again
/// (``DiskQueue/retryFile()``: every queued message rewritten to a fresh file) until it takes the
/// queue, which is logged once too. ``Statistics/durable`` says which it is.
///
/// At a stop (``stop()``), nothing the stage accepted is left only in memory when it can be
/// written: with a queue file, each stored QoS 1/2 message handed to the port live is kept (a
/// dictionary entry, its sequence reserved in the queue) until the port reports it done
/// (``MQTTPort/publish(_:completion:)``, back to the core as ``CoreEvent/liveCompleted(_:)``);
/// those the broker has not acknowledged by the stop are written ahead of the queue (they are
/// older), with the messages a failure episode kept in memory, so the next start replays them
/// first, in order. One the broker received without acknowledging it is sent twice (QoS 1 is at
/// least once). Their number is bounded by the port's backlog (flow control keeps it below half
/// of ``MQTTPort/backlogLimit``).
///
/// Replayed messages carry ``MQTTOutboundMessage/capturedAt``. The gateway never waits for
/// this stage: ``publish(_:kind:)`` only appends to memory and one `write(2)`. Loop-confined.
public final class StoreAndForward {
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
        /// Stored QoS 1/2 messages handed to the port live that it has not reported done yet
        /// (kept to be written to the queue file at a stop; with a queue file only).
        public var unacknowledged = 0

        public init() {}
    }

    /// Seconds between two attempts to write a queue file that could not be written.
    public static let retryInterval = 5.0

    private var queue: DiskQueue
    private var connected = true
    private var replaying = false
    /// A batch is with the port (its completion has not come back).
    private var batchInFlight: [QueuedMessage]?
    private var retryTimer: ClockTimer?
    private var counts = Statistics()
    private var attempts = 0
    /// When the queue file's current failure episode began (``clock`` time); nil: none.
    private var failingSince: Double?
    private var fileRetryTimer: ClockTimer?
    /// Stored QoS 1/2 messages handed to the port live and not reported done, by the sequence
    /// reserved for them in the queue (with a queue file only: without one nothing survives a stop).
    private var unacknowledged: [UInt64: QueuedMessage] = [:]
    private let tracksLiveMessages: Bool
    private var stopped = false
    private let mqtt: any MQTTPort
    private let clock: any GatewayClock
    private let settings: StoreAndForwardSettings
    private let log: GatewayLogger
    private let queuePath: String?
    /// Brings the port's completions and the retry timer back to the core.
    private let deliver: @Sendable (CoreEvent) -> Void
    /// The loop the retry timer fires on.
    private let loop: EventLoop

    /// - Parameters:
    ///   - queue: the queue (file-backed or memory only); the stage owns it from now on.
    ///   - deliver: brings the port's completions and the retry timers back to the core.
    ///   - loop: the loop the retry timers fire on.
    init(
        queue: DiskQueue, mqtt: any MQTTPort, clock: any GatewayClock, settings: StoreAndForwardSettings,
        logger: GatewayLogger = .none, deliver: @escaping @Sendable (CoreEvent) -> Void, loop: EventLoop
    ) {
        self.deliver = deliver
        self.loop = loop
        queuePath = queue.path
        tracksLiveMessages = queue.path != nil
        self.queue = queue
        counts.discardedBytes = queue.discardedBytes
        self.mqtt = mqtt
        self.clock = clock
        self.settings = settings
        self.log = logger
    }

    /// The stage of the core `context` belongs to: its queue in the state directory
    /// (``Gateway/queueFileName``; memory only without a state directory) with what a previous
    /// run left to replay (logged), its completions and retry timers brought back to the core's
    /// loop. Throws when the queue file cannot be opened at all.
    convenience init(context: CoreContext) throws(StoreAndForwardError) {
        let settings = context.config.storeAndForward
        let queue = try DiskQueue(
            path: context.stateDirectory.map { $0 + "/" + Gateway.queueFileName }, limits: DiskQueue.Limits(settings))
        if queue.discardedBytes > 0 {
            context.log(
                .warning,
                "store-and-forward: discarded \(queue.discardedBytes) bytes of a damaged tail of \(queue.path ?? "")")
        }
        if !queue.isEmpty {
            context.log(.notice, "store-and-forward: \(queue.count) messages from the previous run to replay")
        }
        self.init(
            queue: queue, mqtt: context.output.mqtt, clock: context.clock, settings: settings, logger: context.log,
            deliver: context.deliver, loop: context.loop)
    }

    /// The counters, with the queue's current depth.
    public var statistics: Statistics {
        var statistics = counts
        statistics.depth = queue.count
        statistics.bytes = queue.bytes
        statistics.droppedFull = queue.drops.full
        statistics.droppedExpired = queue.drops.expired
        statistics.droppedUnreadable = queue.drops.unreadable
        statistics.writeErrors = queue.writeErrors
        statistics.durable = queue.isDurable
        statistics.memoryOnly = queue.memoryOnlyCount
        statistics.freeBytes = queuePath.flatMap(DiskQueue.freeBytes(besides:))
        statistics.unacknowledged = unacknowledged.count
        return statistics
    }

    // MARK: The queue file's failure episodes

    /// After every operation on the queue: a failure of its file that begins an episode is
    /// logged, and the file is tried again every ``retryInterval``. Also at the start, for a
    /// file that could not be opened for writing.
    func checkFile() {
        guard failingSince == nil, let failure = queue.fileFailure else { return }
        failingSince = clock.now()
        log(
            .error,
            "store-and-forward: \(failure): queue kept in memory only (lost if gattway stops), bounded by "
                + "max_messages \(settings.maxMessages) and max_bytes \(settings.maxBytes); trying the file again every "
                + "\(Int(saturating: Self.retryInterval)) s")
        scheduleFileRetry()
    }

    private func scheduleFileRetry() {
        let deliver = self.deliver
        fileRetryTimer = clock.schedule(at: clock.now() + Self.retryInterval, on: loop) { deliver(.queueFileRetry) }
    }

    /// One attempt to end the failure episode (the retry timer fired): the next in
    /// ``retryInterval`` when the file still fails, else the recovery is logged.
    func retryFile() {
        fileRetryTimer = nil
        guard let since = failingSince else { return }
        let moved = queue.memoryOnlyCount
        guard queue.retryFile() else { return scheduleFileRetry() }
        failingSince = nil
        log(
            .notice,
            "store-and-forward: writing the queue file \(queuePath ?? "") again after "
                + "\(Int(saturating: (clock.now() - since).rounded())) s: \(moved) messages moved from memory into it")
    }

    /// Hands `message` to the port (live) or queues it.
    func publish(_ message: MQTTOutboundMessage, kind: OutboundKind) {
        if connected && !replaying {
            // Flow control: the client holds half its bound → readings wait here, in order.
            guard kind == .stored, message.qos > 0, let limit = mqtt.backlogLimit, mqtt.backlog >= limit / 2 else {
                return sendLive(message, kind: kind)
            }
            replaying = true
            counts.spilled += 1
            enqueue(message)
            log(
                .info,
                "store-and-forward: the broker is behind (\(mqtt.backlog) messages unacknowledged): queueing readings in order"
            )
            replayNext()
            return
        }
        // During a replay only stored messages wait behind it (their order matters);
        // republished retained state and snapshots go out at once and never take a place in
        // the bounded queue (they would push out readings captured during the outage).
        if connected {
            guard kind == .stored else { return sendLive(message, kind: kind) }
            counts.spilled += 1
        } else {
            guard kind == .stored else { return }
            if message.qos == 0 && !settings.queueQoS0 {
                counts.droppedQoS0 += 1
                return
            }
        }
        enqueue(message)
    }

    private func enqueue(_ message: MQTTOutboundMessage) {
        let now = clock.wallMilliseconds()
        queue.append(message, capturedAt: message.capturedAt ?? now, now: now)
        counts.queued += 1
        checkFile()
    }

    /// Only replayed messages say when they were captured. A stored QoS 1/2 message is kept
    /// until the port reports it done, to be written to the queue file if the gateway stops
    /// before the broker acknowledged it.
    private func sendLive(_ message: MQTTOutboundMessage, kind: OutboundKind) {
        var outgoing = message
        outgoing.capturedAt = nil
        guard tracksLiveMessages, kind == .stored, message.qos > 0 else { return mqtt.publish(outgoing) }
        let sequence = queue.reserveSequence()
        unacknowledged[sequence] = QueuedMessage(
            message: outgoing, capturedAt: message.capturedAt ?? clock.wallMilliseconds(),
            sequence: sequence)
        let deliver = self.deliver
        mqtt.publish(outgoing) { _ in deliver(.liveCompleted(sequence)) }
    }

    /// The port reported a message handed over live done (acknowledged, or failed for good: a
    /// broker's refusal): it is no longer kept for a stop.
    func liveCompleted(_ sequence: UInt64) {
        unacknowledged.removeValue(forKey: sequence)
    }

    /// Most messages one replay step hands to the port at once: the port's backlog limit
    /// leaves room for them (half of `mqtt.max_queued`, at most 1,000, at least 1).
    var replayBatch: Int { max(1, min(1_000, (mqtt.backlogLimit ?? 2_000) / 2)) }

    /// The port's connection changed: `false` switches to offline, `true` starts the replay
    /// (or goes live when nothing is queued).
    public func connectionChanged(_ connected: Bool) {
        self.connected = connected
        guard connected, !replaying, !queue.isEmpty else { return }
        replaying = true
        log(.notice, "MQTT connected: replaying \(queue.count) queued messages")
        replayNext()
    }

    /// Hands the next batch to the port, or ends the replay when nothing (readable) is left or
    /// the connection is lost. A batch in flight is pinned in the queue (its completion removes
    /// what was acknowledged).
    private func replayNext() {
        guard batchInFlight == nil, retryTimer == nil else { return }
        queue.dropExpired(now: clock.wallMilliseconds())
        let unreadableBefore = queue.drops.unreadable
        let batch = connected ? queue.oldest(replayBatch) : []
        let unreadable = queue.drops.unreadable - unreadableBefore
        checkFile()
        if unreadable > 0 {
            log(
                .error,
                "store-and-forward: \(unreadable) queued messages could not be read back from \(queuePath ?? "the queue file") and were dropped"
            )
        }
        guard !batch.isEmpty else {
            replaying = false
            return
        }
        queue.pinned = batch.count
        batchInFlight = batch
        let deliver = self.deliver
        mqtt.publishInOrder(
            batch.map { queued in
                var message = queued.message
                message.capturedAt = queued.capturedAt
                return message
            }
        ) { results in deliver(.replayed(results)) }
    }

    /// The port reported a batch: the acknowledged prefix leaves the queue; after a failure the
    /// rest goes again a second later (a message the connected broker refuses three times is
    /// dropped).
    func replayed(_ results: [Bool]) {
        guard let batch = batchInFlight else { return }
        batchInFlight = nil
        let failed = batch.indices.first { !(results.indices.contains($0) && results[$0]) }
        for queued in batch[..<(failed ?? batch.count)] where queue.remove(queued.sequence) {
            counts.replayed += 1
        }
        queue.pinned = 0
        checkFile()
        guard let failed else {
            attempts = 0
            return replayNext()
        }
        attempts += 1
        if connected, attempts >= 3 {
            attempts = 0
            if let first = queue.firstSequence, queue.remove(first) { counts.rejected += 1 }
            log(.warning, "store-and-forward: \(batch[failed].message.topic) refused 3 times, dropped")
            return replayNext()
        }
        guard connected else {
            replaying = false
            return
        }
        let deliver = self.deliver
        retryTimer = clock.schedule(at: clock.now() + 1, on: loop) { deliver(.replayRetry) }
    }

    /// A second after a failed batch: try again.
    func retryDue() {
        retryTimer = nil
        guard connected else {
            replaying = false
            return
        }
        replayNext()
    }

    /// Ends the stage's timers (the gateway begins to stop).
    func stopTimers() {
        retryTimer?.cancel()
        retryTimer = nil
        fileRetryTimer?.cancel()
        fileRetryTimer = nil
    }

    /// The gateway stops (after `bridge/state` offline had its chance, so what the broker
    /// acknowledged meanwhile is not written): the stored messages handed over live that the
    /// broker has not acknowledged are put ahead of the queue (they are older than everything in
    /// it) and, with them, what a failure episode kept in memory is written to the queue file, in
    /// order, for the next start to replay first. Logged; what cannot be written (no state
    /// directory, a file that still cannot be written) is lost and logged as such. Once.
    func stop() {
        guard !stopped else { return }
        stopped = true
        stopTimers()
        let inFlight = unacknowledged.values.sorted { $0.sequence < $1.sequence }
        unacknowledged = [:]
        guard let path = queuePath else {
            if !queue.isEmpty {
                log(
                    .warning,
                    "store-and-forward: \(queue.count) queued messages are lost: without a state directory the queue is in memory only"
                )
            }
            return
        }
        let ahead = queue.prepend(inFlight)
        if ahead < inFlight.count {
            // Not expected: a message goes live only while nothing is queued (so it is older).
            log(
                .warning,
                "store-and-forward: \(inFlight.count - ahead) unacknowledged messages not written: newer than the queue"
            )
        }
        let held = queue.memoryOnlyCount
        guard held > 0 else { return }
        let queued = queue.count - ahead
        if queue.persist() {
            var parts: [String] = []
            if ahead > 0 {
                parts.append("\(ahead) messages the broker had not acknowledged (ahead of the \(queued) queued)")
            }
            if held > ahead { parts.append("\(held - ahead) messages kept in memory") }
            log(
                .notice,
                "store-and-forward: wrote \(parts.joined(separator: " and ")) to \(path): the next start replays "
                    + "the \(queue.count) queued messages in order")
        } else {
            let reason = queue.fileFailure.map { "\($0)" } ?? "cannot write \(path)"
            log(
                .error,
                "store-and-forward: \(reason): \(held) messages kept only in memory are lost "
                    + "(\(ahead) not acknowledged by the broker)")
        }
    }
}
