import Foundation
import Synchronization

/// Keeps dispatch signal sources alive for the rest of the process (a source is cancelled when
/// its last reference goes).
enum SignalSources {
    /// Invariant behind `nonisolated(unsafe)`: only read or written inside `lock`.
    nonisolated(unsafe) private static var retained: [DispatchSourceSignal] = []
    private static let lock = Mutex(())

    static func keep(_ sources: [DispatchSourceSignal]) {
        lock.withLock { _ in retained += sources }
    }
}
