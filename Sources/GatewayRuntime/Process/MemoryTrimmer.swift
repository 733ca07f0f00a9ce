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

    public static func start(on loop: EventLoop) {
        #if canImport(Glibc)
            guard let symbol = dlsym(nil, "malloc_trim") else { return }
            typealias MallocTrim = @convention(c) (Int) -> Int32
            let trim = unsafeBitCast(symbol, to: MallocTrim.self)
            loop.execute { schedule(on: loop) { _ = trim(0) } }
        #endif
    }

    private static func schedule(on loop: EventLoop, _ trim: @escaping () -> Void) {
        _ = loop.addTimer(after: interval) {
            trim()
            schedule(on: loop, trim)
        }
    }
}
