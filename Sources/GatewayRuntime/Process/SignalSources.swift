import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Keeps dispatch signal sources alive for the rest of the process (a source is cancelled when
/// its last reference goes).
public enum SignalSources {
    /// Invariant behind `nonisolated(unsafe)`: only read or written inside `lock`.
    nonisolated(unsafe) private static var retained: [DispatchSourceSignal] = []
    private static let lock = Mutex(())

    public static func keep(_ sources: [DispatchSourceSignal]) {
        lock.withLock { _ in retained += sources }
    }

    /// Waits for SIGINT or SIGTERM and returns its name (dispatch signal sources; the default
    /// actions are disabled, so the process ends only when the caller is done cleaning up).
    public static func waitForTermination() async -> String {
        await withCheckedContinuation { continuation in
            let once = OnceFlag()
            onTermination { name in
                if once.claim() { continuation.resume(returning: name) }
            }
        }
    }

    /// SIGINT or SIGTERM from now on, as a value to wait for (no task): the first one's name.
    /// The default actions are disabled, as for ``waitForTermination()``.
    public static func termination() -> OneShot<String> { termination(of: terminationSignals) }

    /// The signals that end the process: SIGINT and SIGTERM, with their names.
    static let terminationSignals: [(number: Int32, name: String)] = [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")]

    /// The first of `signals` from now on, as a value to wait for; their default actions disabled.
    static func termination(of signals: [(number: Int32, name: String)]) -> OneShot<String> {
        let received = OneShot<String>()
        onTermination(of: signals) { received.set($0) }
        return received
    }

    /// Calls `handler` (on a dispatch queue) with the name of each of `signals` that arrives.
    private static func onTermination(
        of signals: [(number: Int32, name: String)] = terminationSignals,
        _ handler: @escaping @Sendable (String) -> Void
    ) {
        var sources: [DispatchSourceSignal] = []
        for (number, name) in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { handler(name) }
            source.resume()
            sources.append(source)
        }
        keep(sources)
    }
}
