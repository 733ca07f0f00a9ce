import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Keeps dispatch signal sources alive for the rest of the process (a source is cancelled when
/// its last reference goes).
enum SignalSources {
    /// Invariant behind `nonisolated(unsafe)`: only read or written inside `lock`.
    nonisolated(unsafe) private static var retained: [DispatchSourceSignal] = []
    private static let lock = Mutex(())

    static func keep(_ sources: [DispatchSourceSignal]) {
        lock.withLock { _ in retained += sources }
    }

    /// Waits for SIGINT or SIGTERM and returns its name (dispatch signal sources; the default
    /// actions are disabled, so the process ends only when the caller is done cleaning up).
    static func waitForTermination() async -> String {
        await withCheckedContinuation { continuation in
            let once = OnceFlag()
            var sources: [DispatchSourceSignal] = []
            for (number, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler {
                    if once.claim() { continuation.resume(returning: name) }
                }
                source.resume()
                sources.append(source)
            }
            keep(sources)
        }
    }
}
