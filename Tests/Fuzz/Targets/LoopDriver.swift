import EventLoop
import Glibc
import Synchronization

/// Runs a fuzz input's async driver to completion for a synchronous fuzz callback, against a
/// gateway on a real ``EventLoop`` (one for the process, shared by every input).
///
/// Deterministic: the gateway, its jobs and the in-memory ports' deliveries run on that one
/// loop thread in the order they were queued; the driver waits for the loop to settle
/// (``EventLoop/settle()``) after each step; the fakes and the manual clock never wait on real
/// time. A driver that has not finished after ``timeout`` seconds of real time is stuck (a call
/// into the gateway hangs).
public enum LoopDriver {
    /// The loop every input's gateway runs on.
    public static let loop = EventLoop(name: "fuzz-gateway")

    /// The thread the drivers themselves run on (a task executor): never a thread of Swift's
    /// global pool, which ``run(_:)`` blocks one of while it waits — with two cores the pool has
    /// two, so two inputs waiting at once (fuzz targets tested in parallel) would otherwise leave
    /// no thread for their drivers until the timeout.
    static let driverLoop = EventLoop(name: "fuzz-driver")

    /// Real seconds a driver may take before it counts as stuck.
    public static let timeout = 60.0

    /// How ``run(_:)`` ended.
    public enum Outcome: Equatable {
        case finished
        case stuck
    }

    /// One driver at a time in the process: inputs share the loop, and a property failure of
    /// one input must not be mixed with another's messages.
    private static let runLock = Mutex(())

    /// Runs `body` on ``driverLoop`` and blocks the calling thread until it finished, or until
    /// ``timeout``.
    @discardableResult
    public static func run(_ body: @escaping @Sendable () async -> Void) -> Outcome {
        runLock.withLock { _ in
            let done = Completion()
            let task = Task(executorPreference: driverLoop.taskExecutor) {
                await body()
                done.signal()
            }
            if done.wait(seconds: timeout) { return .finished }
            task.cancel()
            return .stuck
        }
    }

    /// A one-shot flag another thread waits for (pthread mutex and condition variable).
    private final class Completion: @unchecked Sendable {
        // Invariant for @unchecked Sendable: `finished` is read and written under `mutex`.
        private var mutex = pthread_mutex_t()
        private var condition = pthread_cond_t()
        private var finished = false

        init() {
            pthread_mutex_init(&mutex, nil)
            pthread_cond_init(&condition, nil)
        }

        deinit {
            pthread_cond_destroy(&condition)
            pthread_mutex_destroy(&mutex)
        }

        func signal() {
            pthread_mutex_lock(&mutex)
            finished = true
            pthread_cond_broadcast(&condition)
            pthread_mutex_unlock(&mutex)
        }

        /// True once signalled; false after `seconds` without.
        func wait(seconds: Double) -> Bool {
            var deadline = timespec()
            clock_gettime(CLOCK_REALTIME, &deadline)
            deadline.tv_sec += Int(seconds)
            pthread_mutex_lock(&mutex)
            defer { pthread_mutex_unlock(&mutex) }
            while !finished {
                if pthread_cond_timedwait(&condition, &mutex, &deadline) == ETIMEDOUT { return finished }
            }
            return true
        }
    }
}
