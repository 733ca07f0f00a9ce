#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A detached pthread with a chosen stack size and name, and a one-shot "stopped" flag
/// other threads can wait for (pthread mutex + condition variable, no Foundation `Thread`/
/// `NSCondition`, so the event loop does not pull Foundation into the process).
final class LoopThread: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var stopped = false  // guarded by `mutex`

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    /// Starts a detached thread running `body` with a `stackSize`-byte stack; its name (at most
    /// 15 bytes are kept by Linux) shows in `ps -L` and debuggers.
    func start(name: String, stackSize: Int, _ body: @escaping @Sendable () -> Void) {
        final class Box {
            let body: @Sendable () -> Void
            let name: String
            init(_ body: @escaping @Sendable () -> Void, _ name: String) {
                self.body = body
                self.name = name
            }
        }
        let context = Unmanaged.passRetained(Box(body, name)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, stackSize)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        #if canImport(Glibc)
            var thread = pthread_t()
        #else
            var thread: pthread_t?
        #endif
        let rc = pthread_create(
            &thread, &attributes,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                LoopThread.setName(box.name)
                box.body()
                return nil
            }, context)
        precondition(rc == 0, "pthread_create failed: \(String(cString: strerror(rc)))")
    }

    /// Names the calling thread. Glibc's `pthread_setname_np` is not visible to Swift (it needs
    /// `_GNU_SOURCE`), so on Linux the name is written to `/proc/thread-self/comm`.
    private static func setName(_ name: String) {
        #if canImport(Glibc)
            let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
            let bytes = Array(name.utf8.prefix(15))
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
        #else
            _ = pthread_setname_np(name)
        #endif
    }

    /// Marks the thread as stopped and wakes every ``waitUntilStopped()``.
    func markStopped() {
        pthread_mutex_lock(mutex)
        stopped = true
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    /// Returns once ``markStopped()`` was called (at once if it already was).
    func waitUntilStopped() {
        pthread_mutex_lock(mutex)
        while !stopped { pthread_cond_wait(condition, mutex) }
        pthread_mutex_unlock(mutex)
    }
}
