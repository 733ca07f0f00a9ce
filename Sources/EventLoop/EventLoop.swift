import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The one thread that owns every C library connection of the process (libdbus, libmosquitto).
///
/// A `poll()` loop over registered file descriptors and timers, plus a wake-up pipe so any
/// other thread can hand it work through ``execute(_:)``. It is also a `SerialExecutor`: actors
/// whose `unownedExecutor` returns ``asUnownedSerialExecutor()`` run their jobs on this thread, so
/// isolation of the C state is checked by the compiler and C callbacks (which arrive on this
/// thread) may enter such an actor with `assumeIsolated`. Its ``taskExecutor`` runs tasks too: a
/// task started with it as executor preference (`group.addTask(executorPreference:
/// loop.taskExecutor)`) runs its nonisolated code on this thread, so its calls into actors of
/// this loop are no thread hops (docs/architecture.md).
///
/// Threading rules:
/// - ``execute(_:)``, ``enqueue(_:)`` and ``shutdown()`` may be called from any thread.
/// - Watches, timers and prepare hooks (``addWatch(fd:events:handler:)``, ``addTimer(after:handler:)``,
///   ``addPrepareHook(_:)`` and their update/remove calls) are loop-thread only; calling them
///   elsewhere traps, because that is a programming error, not bad input.
/// - Handlers run on the loop thread and must not block.
///
/// Invariant behind `@unchecked Sendable`: every stored property except `inbox`, the pipe ends,
/// `loopThreadID`, `state` and `unfinished` is read and written on the loop thread only (checked by
/// `preconditionInLoop()`); `inbox` is guarded by its `Mutex`, the others are atomics or immutable.
public final class EventLoop: SerialExecutor, @unchecked Sendable {
    /// Readiness conditions of a file descriptor (`POLLIN`, `POLLOUT`, `POLLERR`, `POLLHUP`).
    public struct IOEvents: OptionSet, Sendable, Hashable {
        public let rawValue: Int16
        public init(rawValue: Int16) { self.rawValue = rawValue }
        /// `POLLIN`: data can be read.
        public static let readable = IOEvents(rawValue: Int16(POLLIN))
        /// `POLLOUT`: data can be written.
        public static let writable = IOEvents(rawValue: Int16(POLLOUT))
        /// `POLLERR`: an error condition (always reported, never requested).
        public static let error = IOEvents(rawValue: Int16(POLLERR))
        /// `POLLHUP`: the peer hung up (always reported, never requested).
        public static let hangup = IOEvents(rawValue: Int16(POLLHUP))
    }

    /// Identifies a registered watch, timer or hook, for later update or removal.
    public struct Token: Hashable, Sendable {
        fileprivate let id: UInt64
    }

    private struct Watch {
        var fd: Int32
        var events: IOEvents
        var handler: (IOEvents) -> Void
        /// How long (ns) the watch rests after a handling (``setCoalescing(_:interval:)``); 0: never.
        var coalescing: UInt64 = 0
        /// The timer that ends the watch's rest, while it rests (left out of `poll()`).
        var rest: Token?
    }

    private struct Timer {
        var deadline: UInt64
        var handler: () -> Void
    }

    private enum Work {
        case closure(@Sendable () -> Void)
        /// A job of an actor whose executor is this loop.
        case job(UnownedJob)
        /// A job of a task that prefers ``taskExecutor``.
        case taskJob(UnownedJob)
    }

    private let inbox = Mutex<[Work]>([])
    private let wakeFD: Int32  // read end of the wake-up pipe
    private let wakeWriteFD: Int32
    private let loopThreadID = Atomic<UInt>(0)
    private let state = Atomic<Int>(0)  // 0 running, 1 stopping, 2 stopped
    /// Work items queued and not yet finished (for ``settle()``).
    private let unfinished = Atomic<Int>(0)
    private let thread = LoopThread()

    // Loop-thread-only state.
    private var nextID: UInt64 = 1
    private var watches: [UInt64: Watch] = [:]
    private var watchOrder: [UInt64] = []
    private var timers: [UInt64: Timer] = [:]
    /// Timer ids by deadline; a cancelled or re-armed timer's entry is skipped when it surfaces.
    private var timerHeap = DeadlineHeap<UInt64>()
    private var prepareHooks: [(UInt64, () -> Void)] = []
    /// Prepare hooks added with `last`: they run after ``prepareHooks``.
    private var lastPrepareHooks: [(UInt64, () -> Void)] = []
    private var pollFDs: [pollfd] = []
    private var pollIDs: [UInt64] = []

    /// Starts the loop thread.
    /// - Parameter name: the thread's name as shown by `ps -L` and debuggers.
    public init(name: String = "gattway-loop") {
        var ends: [Int32] = [-1, -1]
        let created = pipe(&ends)
        precondition(created == 0, "pipe failed: \(String(cString: strerror(errno)))")
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        wakeFD = ends[0]
        wakeWriteFD = ends[1]
        taskExecutorStorage = LoopTaskExecutor(loop: self)
        thread.start(name: name, stackSize: 1 << 20) { [self] in self.runLoop() }
        // Wait until the thread has published its id, so `inLoop` is exact from the start.
        while loopThreadID.load(ordering: .acquiring) == 0 { sched_yield() }
    }

    deinit {
        close(wakeFD)
        close(wakeWriteFD)
    }

    /// True when the caller runs on this loop's thread.
    public var inLoop: Bool {
        loopThreadID.load(ordering: .relaxed) == UInt(bitPattern: Int(bitPattern: UInt(pthread_self())))
    }

    /// Traps unless called on the loop thread (a programming error, not an input error).
    public func preconditionInLoop(file: StaticString = #fileID, line: UInt = #line) {
        precondition(inLoop, "must be called on the event loop thread", file: file, line: line)
    }

    /// Runs `body` on the loop thread, after work already queued. Callable from any thread,
    /// including the loop thread itself (then it runs on the next turn, never re-entrantly).
    public func execute(_ body: @escaping @Sendable () -> Void) {
        push(.closure(body))
    }

    /// Runs `body` on the loop thread and returns its result to an async caller.
    public func submit<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            execute { continuation.resume(with: Result { try body() }) }
        }
    }

    /// Returns once the loop has nothing left to run: everything queued so far has run, and what
    /// it queued in turn, until a turn ends with no work waiting. What still waits then waits for
    /// a file descriptor, a timer or another thread. For tests of code that runs on the loop
    /// (drive inputs, settle, look at the outcome) — deterministic with fakes that never wait on
    /// real time. Must not be called on the loop thread.
    public func settle() async {
        precondition(!inLoop, "settle() would wait for itself on the loop thread")
        while true {
            // The closure itself is one unfinished item; any other means more work is queued.
            let idle: Bool = (try? await submit { [self] in unfinished.load(ordering: .acquiring) == 1 }) ?? true
            if idle { return }
        }
    }

    // MARK: SerialExecutor

    public func enqueue(_ job: consuming ExecutorJob) {
        push(.job(UnownedJob(job)))
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// The loop as a task executor: tasks that prefer it run their nonisolated code on the
    /// loop thread (the gateway's jobs), in order with everything else the loop runs.
    public var taskExecutor: any TaskExecutor { loopTaskExecutor }

    /// See ``taskExecutor``. Holds the loop unowned: the loop owns it.
    private final class LoopTaskExecutor: TaskExecutor {
        unowned let loop: EventLoop

        init(loop: EventLoop) { self.loop = loop }

        func enqueue(_ job: consuming ExecutorJob) {
            loop.push(.taskJob(UnownedJob(job)))
        }
    }

    /// Set once in `init`, before the thread starts; never written again.
    private var taskExecutorStorage: LoopTaskExecutor?
    private var loopTaskExecutor: LoopTaskExecutor { taskExecutorStorage! }

    public func checkIsolated() {
        preconditionInLoop()
    }

    public func isIsolatingCurrentContext() -> Bool? {
        inLoop
    }

    /// Stops the loop after the work already queued and waits for the thread to end.
    /// Watches and timers still registered are dropped without being called.
    /// Must not be called on the loop thread.
    public func shutdown() {
        precondition(!inLoop, "shutdown() would wait for itself on the loop thread")
        if state.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged {
            wake()
        }
        thread.waitUntilStopped()
    }

    // MARK: Loop-thread registration

    /// Registers `fd` for `events`; `handler` runs on the loop thread with the events that occurred
    /// (`error` and `hangup` are always reported). An empty `events` set keeps the watch but
    /// disables it. Loop thread only.
    public func addWatch(fd: Int32, events: IOEvents, handler: @escaping (IOEvents) -> Void) -> Token {
        preconditionInLoop()
        let id = allocateID()
        watches[id] = Watch(fd: fd, events: events, handler: handler)
        watchOrder.append(id)
        return Token(id: id)
    }

    /// Changes the events a watch waits for. Loop thread only.
    public func updateWatch(_ token: Token, events: IOEvents) {
        preconditionInLoop()
        watches[token.id]?.events = events
    }

    /// Coalesces a watch's input: once its handler ran, the watch *rests* for `interval` seconds —
    /// it is left out of `poll()`, so what arrives meanwhile waits in the descriptor's buffer —
    /// and is then polled again, and what gathered is handled in one turn. A steady stream then
    /// costs one wake-up per `interval`, not one per arrival; the first arrival after a quiet
    /// spell is handled at once, and a watch that has nothing to read is polled like any other
    /// (an idle loop sleeps without timers).
    ///
    /// So that a rest never leaves a backlog behind (a handler may read only part of what is
    /// there, as libdbus does), the loop asks the descriptor again without waiting after each
    /// handling and calls the handler again while it is ready, up to ``coalescedRounds`` times;
    /// a watch still ready after that does not rest (more arrives than the handler reads: no
    /// coalescing then, so nothing piles up). `interval` 0 (the default) ends a rest at once and
    /// turns coalescing off, as does one that is not finite or longer than 31 years. Loop thread only.
    public func setCoalescing(_ token: Token, interval: Double) {
        preconditionInLoop()
        guard var watch = watches[token.id] else { return }
        // A rest that would never end (infinite, or past the clock's range) or a NaN is no rest.
        let nanoseconds = interval * 1e9
        watch.coalescing =
            nanoseconds > 0 && nanoseconds < 1e18 ? UInt64(exactly: nanoseconds.rounded(.towardZero)) ?? 0 : 0
        if watch.coalescing == 0, let rest = watch.rest {
            cancelTimer(rest)
            watch.rest = nil
        }
        watches[token.id] = watch
    }

    /// Whether a watch rests now (``setCoalescing(_:interval:)``). Loop thread only.
    public func isResting(_ token: Token) -> Bool {
        preconditionInLoop()
        return watches[token.id]?.rest != nil
    }

    /// Handlings in a row of a coalesced watch that stays ready before it is let be without a
    /// rest (``setCoalescing(_:interval:)``).
    public static let coalescedRounds = 16

    /// Removes a watch; its handler is not called again. Loop thread only.
    public func removeWatch(_ token: Token) {
        preconditionInLoop()
        if let watch = watches.removeValue(forKey: token.id) {
            watchOrder.removeAll { $0 == token.id }
            if let rest = watch.rest { cancelTimer(rest) }
        }
    }

    /// Calls `handler` once on the loop thread after `interval` seconds (monotonic clock).
    /// Loop thread only.
    public func addTimer(after interval: Double, handler: @escaping () -> Void) -> Token {
        preconditionInLoop()
        let id = allocateID()
        // A negative or NaN interval fires at once; one past the clock's range never fires.
        let nanoseconds = interval * 1e9
        let delay: UInt64 = nanoseconds > 0 ? UInt64(exactly: nanoseconds.rounded(.towardZero)) ?? .max : 0
        let (sum, overflow) = Self.now().addingReportingOverflow(delay)
        let deadline = overflow ? .max : sum
        timers[id] = Timer(deadline: deadline, handler: handler)
        timerHeap.insert(id, at: deadline)
        return Token(id: id)
    }

    /// Cancels a timer that has not fired yet. Loop thread only.
    public func cancelTimer(_ token: Token) {
        preconditionInLoop()
        timers.removeValue(forKey: token.id)  // the heap entry is skipped lazily
    }

    /// Registers `hook` to run before every `poll()`, e.g. to dispatch queued libdbus messages or
    /// to ask libmosquitto whether it wants to write. Hooks run in the order they were added,
    /// except that those added with `last` run after all the others: a hook that sends what the
    /// others produced (the MQTT client uncorks the publishes a D-Bus dispatch made, so they leave
    /// before the loop sleeps, not at its next wake-up). Loop thread only.
    public func addPrepareHook(last: Bool = false, _ hook: @escaping () -> Void) -> Token {
        preconditionInLoop()
        let id = allocateID()
        if last {
            lastPrepareHooks.append((id, hook))
        } else {
            prepareHooks.append((id, hook))
        }
        return Token(id: id)
    }

    /// Removes a prepare hook. Loop thread only.
    public func removePrepareHook(_ token: Token) {
        preconditionInLoop()
        prepareHooks.removeAll { $0.0 == token.id }
        lastPrepareHooks.removeAll { $0.0 == token.id }
    }

    /// Monotonic time in nanoseconds (`CLOCK_MONOTONIC`).
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    // MARK: Internals

    private func allocateID() -> UInt64 {
        defer { nextID &+= 1 }
        return nextID
    }

    private func push(_ work: Work) {
        unfinished.add(1, ordering: .relaxed)
        let wasEmpty = inbox.withLock { queue in
            queue.append(work)
            return queue.count == 1
        }
        // The loop thread drains the inbox before it polls again (and then polls without
        // sleeping), so work it queues for itself needs no wake-up: no write(2) per job.
        if wasEmpty, !inLoop { wake() }
    }

    private func wake() {
        var one: UInt8 = 1
        _ = write(wakeWriteFD, &one, 1)  // a full pipe already means "wake up"
    }

    private func runLoop() {
        loopThreadID.store(UInt(bitPattern: Int(bitPattern: UInt(pthread_self()))), ordering: .releasing)
        var drained: [Work] = []
        while state.load(ordering: .acquiring) == 0 {
            for (_, hook) in prepareHooks { hook() }
            for (_, hook) in lastPrepareHooks { hook() }
            // Queued work (also work queued by a hook) means: poll without sleeping, then run it.
            // Always polling keeps I/O serviced even while jobs keep re-enqueueing themselves
            // (a task that yields in a loop would otherwise starve every watch).
            let timeout = inbox.withLock({ $0.isEmpty }) ? pollTimeoutMilliseconds() : 0
            buildPollSet()
            let ready = pollFDs.withUnsafeMutableBufferPointer { buffer in
                poll(buffer.baseAddress, nfds_t(buffer.count), timeout)
            }
            if ready < 0 && errno != EINTR {
                fatalError("poll failed: \(String(cString: strerror(errno)))")  // invalid fd set: a bug
            }
            if ready > 0 {
                if pollFDs[0].revents != 0 {
                    var sink = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
                    while withUnsafeMutableBytes(of: &sink, { read(wakeFD, $0.baseAddress, $0.count) }) > 0 {}
                }
                for index in 1..<pollFDs.count where pollFDs[index].revents != 0 {
                    let id = pollIDs[index]
                    // A previous handler in this turn may have removed or disabled this watch.
                    guard let watch = watches[id], !watch.events.isEmpty, watch.rest == nil else { continue }
                    watch.handler(Self.reported(pollFDs[index].revents))
                    if watch.coalescing > 0 { handleCoalesced(id) }
                }
            }
            fireTimers()
            drainInbox(into: &drained)
        }
        // Run what was queued before shutdown, then release waiters.
        drainInbox(into: &drained)
        watches.removeAll()
        timers.removeAll()
        prepareHooks.removeAll()
        lastPrepareHooks.removeAll()
        state.store(2, ordering: .releasing)
        thread.markStopped()
    }

    private func drainInbox(into drained: inout [Work]) {
        inbox.withLock { swap(&$0, &drained) }
        for work in drained {
            switch work {
            case .closure(let body): body()
            case .job(let job): job.runSynchronously(on: asUnownedSerialExecutor())
            case .taskJob(let job): job.runSynchronously(on: loopTaskExecutor.asUnownedTaskExecutor())
            }
            unfinished.subtract(1, ordering: .releasing)
        }
        // The two buffers trade places every turn and keep their capacity, which is what makes a
        // turn allocation-free; but one that grew to a lag's backlog (thousands of jobs while the
        // loop was behind) would keep that memory for good, so a large one is let go.
        if drained.capacity > Self.retainedWorkCapacity {
            drained = []
        } else {
            drained.removeAll(keepingCapacity: true)
        }
    }

    /// Queued work a turn's buffers keep room for (entries), beyond which they are released.
    static let retainedWorkCapacity = 1024

    /// After a coalesced watch's handler ran: handles it again while its descriptor stays ready
    /// (at most ``coalescedRounds`` times in all), then lets it rest (``setCoalescing(_:interval:)``).
    private func handleCoalesced(_ id: UInt64) {
        for _ in 1..<Self.coalescedRounds {
            // The handler may have removed, disabled or un-coalesced its watch.
            guard let watch = watches[id], !watch.events.isEmpty, watch.coalescing > 0, watch.rest == nil else {
                return
            }
            var probe = pollfd(fd: watch.fd, events: watch.events.rawValue, revents: 0)
            guard poll(&probe, 1, 0) > 0, probe.revents != 0 else {
                let interval = Double(watch.coalescing) / 1e9
                watches[id]?.rest = addTimer(after: interval) { [unowned self] in self.watches[id]?.rest = nil }
                return
            }
            watch.handler(Self.reported(probe.revents))
        }
        // Still ready after every round: more arrives than the handler reads; no rest.
    }

    /// What a handler is told for `poll()`'s `revents`. `POLLNVAL` (the descriptor was closed
    /// while still watched: a bug somewhere in the process) comes as an error and a hang-up, so
    /// the owner tears the watch down; left alone it would be reported again at every turn, a
    /// busy loop that never ends.
    static func reported(_ revents: Int16) -> IOEvents {
        var events = IOEvents(rawValue: revents & ~Int16(POLLNVAL))
        if revents & Int16(POLLNVAL) != 0 { events.formUnion([.error, .hangup]) }
        return events
    }

    private func buildPollSet() {
        pollFDs.removeAll(keepingCapacity: true)
        pollIDs.removeAll(keepingCapacity: true)
        pollFDs.append(pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0))
        pollIDs.append(0)
        for id in watchOrder {
            guard let watch = watches[id], !watch.events.isEmpty, watch.rest == nil else { continue }
            pollFDs.append(pollfd(fd: watch.fd, events: watch.events.rawValue, revents: 0))
            pollIDs.append(id)
        }
    }

    private func pollTimeoutMilliseconds() -> Int32 {
        while let top = timerHeap.first {
            guard let timer = timers[top.key], timer.deadline == top.deadline else {
                _ = timerHeap.popFirst()
                continue
            }
            let now = Self.now()
            if top.deadline <= now { return 0 }
            let gap = top.deadline - now
            let ms = gap / 1_000_000 + (gap % 1_000_000 == 0 ? 0 : 1)
            return Int32(min(ms, UInt64(Int32.max)))
        }
        return -1
    }

    private func fireTimers() {
        let now = Self.now()
        while let top = timerHeap.popDue(now: now) {
            guard let timer = timers[top.key], timer.deadline == top.deadline else { continue }
            timers.removeValue(forKey: top.key)
            timer.handler()
        }
    }
}
