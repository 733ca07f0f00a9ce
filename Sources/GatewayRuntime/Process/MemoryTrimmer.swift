import EventLoop

#if canImport(Glibc)
    import Glibc
#endif

/// Gives the heap's free memory back to the kernel every few seconds (glibc `malloc_trim(0)`,
/// looked up with `dlsym` because the Glibc module does not export `<malloc.h>`).
///
/// glibc returns freed memory only from the top of an arena; after a burst the live objects left
/// scattered through the heap keep everything between them resident. Measured on the bench's
/// 100,000-notification QoS 1 burst: 121 MB resident after it, 24 MB after one `malloc_trim(0)`
/// (BENCHMARKS.md). With little free memory a call costs microseconds; it runs on the loop thread.
public enum MemoryTrimmer {
    public static let interval = 2.0

    /// Trims every ``interval`` seconds on `loop`, from its next turn on, for the rest of the
    /// process; nothing when the C library has no `malloc_trim`.
    public static func start(on loop: EventLoop) {
        guard let trim = mallocTrim else { return }
        start(on: loop, every: interval) { _ = trim(0) }
    }

    /// glibc's `malloc_trim`, nil where the C library has none.
    static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        #if canImport(Glibc)
            guard let symbol = dlsym(nil, "malloc_trim") else { return nil }
            return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        #else
            return nil
        #endif
    }()

    /// Calls `trim` on the loop thread every `interval` seconds, for ever.
    static func start(on loop: EventLoop, every interval: Double, _ trim: @escaping @Sendable () -> Void) {
        loop.execute { schedule(on: loop, every: interval, trim) }
    }

    private static func schedule(on loop: EventLoop, every interval: Double, _ trim: @escaping () -> Void) {
        _ = loop.addTimer(after: interval) {
            trim()
            schedule(on: loop, every: interval, trim)
        }
    }
}
