import Glibc
import Synchronization

/// Runs async code to completion on the calling thread, one job at a time, for fuzz callbacks
/// (which are synchronous): while ``run(_:)`` runs, every job the calling thread hands to the
/// global executor (new tasks, resumed continuations, actors becoming runnable) is kept in a
/// queue here instead and run inline. One thread, FIFO order: an input replays the same way
/// every time, and no thread hop costs a context switch.
///
/// Works through the Swift runtime's `swift_task_enqueueGlobal_hook` (the hook swift-nio uses to
/// take over the global executor), and a task executor that jobs run on, for what the Swift side
/// of the runtime enqueues itself (`Task.yield()`); jobs enqueued by other threads go to the real
/// global executor untouched, so tests running beside a fuzz target are not affected.
public enum InlineExecutor {
    /// The thread whose jobs are captured (0: none).
    private static let capturing = Atomic<UInt>(0)
    nonisolated(unsafe) private static var queue: [UnsafeMutableRawPointer] = []
    nonisolated(unsafe) private static var head = 0
    /// Tasks in ``settle()``, resumed when the queue is empty.
    nonisolated(unsafe) private static var settlers: [UnsafeContinuation<Void, Never>] = []
    nonisolated(unsafe) private static var installed = false
    private static let installLock = Mutex(())
    /// Jobs run without the queue ever being empty before the run counts as a livelock.
    public static let jobBudget = 20_000_000

    /// `swift_task_enqueueGlobal_hook`'s type: the job, and the runtime's own enqueue.
    private typealias Original = @convention(c) (UnsafeMutableRawPointer) -> Void
    private typealias Hook = @convention(c) (UnsafeMutableRawPointer, Original) -> Void

    private static let hook: Hook = { job, original in
        if InlineExecutor.capturing.load(ordering: .acquiring) == UInt(pthread_self()) {
            InlineExecutor.queue.append(job)
        } else {
            original(job)
        }
    }

    private static func install() {
        installLock.withLock { _ in
            guard !installed else { return }
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "swift_task_enqueueGlobal_hook") else {
                fatalError("InlineExecutor: swift_task_enqueueGlobal_hook not found in the Swift runtime")
            }
            symbol.assumingMemoryBound(to: Hook?.self).pointee = hook
            installed = true
        }
    }

    /// How ``run(_:)`` ended.
    public enum Outcome: Equatable {
        case finished
        /// Nothing was runnable but the body had not finished (it waits for something that
        /// never comes), or jobs kept coming without end.
        case stuck
    }

    /// One run at a time in the process (the queue and the hook are shared): a second thread
    /// waits here (tests run fuzz targets in parallel).
    private static let runLock = Mutex(())

    /// Runs `body` to completion, and the jobs left after it (tasks it cancelled unwinding).
    @discardableResult
    public static func run(_ body: @escaping @Sendable () async -> Void) -> Outcome {
        install()
        return runLock.withLock { _ in runAlone(body) }
    }

    private static func runAlone(_ body: @escaping @Sendable () async -> Void) -> Outcome {
        precondition(capturing.load(ordering: .acquiring) == 0, "InlineExecutor.run is not reentrant")
        capturing.store(UInt(pthread_self()), ordering: .releasing)
        defer { capturing.store(0, ordering: .releasing) }
        let completion = Completion()
        Task {
            await body()
            completion.done = true
        }
        var jobs = 0
        head = 0
        while true {
            if head < queue.count, jobs < jobBudget {
                jobs += 1
                // A task that keeps yielding (a write that never completes, polling for its
                // cancellation) never lets the queue empty: the settlers go on after a while,
                // so the body can move the clock to the deadline that ends it.
                if jobs % settleBudget == 0, !settlers.isEmpty { resumeSettlers() }
                let job = queue[head]
                head += 1
                if head > 1024, head * 2 > queue.count {
                    queue.removeFirst(head)
                    head = 0
                }
                runJob(job)
                continue
            }
            if jobs >= jobBudget { return .stuck }
            jobs = 0
            queue.removeAll(keepingCapacity: true)
            head = 0
            if !settlers.isEmpty {
                resumeSettlers()
                continue
            }
            return completion.done ? .finished : .stuck
        }
    }

    private static func resumeSettlers() {
        let waiting = settlers
        settlers.removeAll()
        for settler in waiting { settler.resume() }
    }

    /// Jobs run while the queue never empties before ``settle()`` returns anyway.
    public static let settleBudget = 2_000

    /// Jobs waiting to run (read from inside ``run(_:)``'s body).
    public static var pendingJobs: Int { queue.count - head }

    /// Inside the body: returns once nothing else is runnable — every other task waits for an
    /// event or the clock — or after ``settleBudget`` jobs when something keeps yielding.
    public static func settle() async {
        await withUnsafeContinuation { settlers.append($0) }
    }

    /// Set by the body's task; read by the loop on the same thread.
    private final class Completion: @unchecked Sendable {
        var done = false
    }

    /// Runs a job with ``Preference`` as its task executor, so that what the Swift side of the
    /// runtime enqueues on "the current executor" (`Task.yield()`) comes back here too.
    private static func runJob(_ job: UnsafeMutableRawPointer) {
        unsafeBitCast(job, to: UnownedJob.self).runSynchronously(on: preference.asUnownedTaskExecutor())
    }

    private static let preference = Preference()

    /// The task executor jobs run on: it queues what is enqueued on it with the rest.
    private final class Preference: TaskExecutor {
        func enqueue(_ job: consuming ExecutorJob) {
            let raw = unsafeBitCast(UnownedJob(job), to: UnsafeMutableRawPointer.self)
            if InlineExecutor.capturing.load(ordering: .acquiring) == UInt(pthread_self()) {
                InlineExecutor.queue.append(raw)
            } else {
                // A job of ours resumed from another thread: it runs there.
                unsafeBitCast(raw, to: UnownedJob.self).runSynchronously(on: asUnownedTaskExecutor())
            }
        }
    }
}
