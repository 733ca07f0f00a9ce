import EventLoop
import Gateway

#if canImport(Glibc)
    import Glibc
#endif

/// The one deadline of `gattway run`'s stop (docs/operations.md, "Stopping"): from SIGTERM or
/// SIGINT to the exit takes at most ``bound`` seconds, shared like this:
///
/// - until ``waitLimit`` after the signal: the gateway's jobs end (cancelled and awaited), then
///   at the same time BlueZ ends the links (`Disconnect`, which BlueZ answers after ~2 s) and
///   the broker acknowledges `bridge/state` offline (at most ``Gateway/offlinePublishTimeout``),
///   after which the store-and-forward queue file takes what lived only in memory (local disk)
///   while the links may still be ending; and the Bluetooth proxy stops (its clients' links
///   disconnected, Avahi's `Free` of the announcement, at most 2 s); whatever is still waited
///   for at ``waitLimit`` is cancelled (``bounded(_:_:)``);
/// - then, at once, MQTT DISCONNECT is written and the BlueZ managers close (discovery stopped,
///   peripheral registrations removed), for at most ``closeLimit`` more (or until ``waitLimit``
///   after the signal, when that is later);
/// - at ``bound`` the process ends whatever it is doing (``armBackstop()``; exit status 1).
///
/// In the worst case (a frozen bluetoothd, a frozen broker, a frozen avahi-daemon) the stop takes
/// about `waitLimit + closeLimit`; with both answering, about as long as BlueZ's Disconnect. The
/// margin to ``bound`` is for writing the queue file on slow storage (a full 18 MB queue file
/// is rewritten in about 0.1 s on an SSD; an SD card may take a second or two).
public struct StopDeadline: Sendable {
    /// Seconds from the signal to the process's exit, at most (whole seconds: `alarm(2)`).
    /// systemd's `TimeoutStopSec` (deploy/gattway.service) leaves a margin above it.
    public static let bound: UInt32 = 5
    /// Seconds after the signal until which the stop waits for BlueZ and the broker.
    public static let waitLimit = Gateway.stopTimeout
    /// Seconds the last step (MQTT DISCONNECT, closing the BlueZ managers) may take.
    public static let closeLimit = 0.5

    /// When the stop began (the signal arrived, or the start failed).
    public let began: ContinuousClock.Instant
    /// This stop's ``waitLimit`` and ``closeLimit`` (`gattway run`: the static ones; tests: shorter).
    public let waitLimit: Double
    public let closeLimit: Double

    /// A stop that begins now, without the backstop (``begin()`` arms it).
    public init(waitLimit: Double = StopDeadline.waitLimit, closeLimit: Double = StopDeadline.closeLimit) {
        began = ContinuousClock.now
        self.waitLimit = waitLimit
        self.closeLimit = closeLimit
    }

    /// Begins a stop now and arms the backstop.
    public static func begin() -> StopDeadline {
        armBackstop()
        return StopDeadline()
    }

    /// Seconds since the stop began.
    public var elapsed: Double { Self.seconds(ContinuousClock.now - began) }

    /// Seconds left until ``waitLimit`` after the signal (0 when it passed).
    public var waitRemaining: Double { max(0, waitLimit - elapsed) }

    /// Seconds the last step may take from now.
    public var closeRemaining: Double { max(closeLimit, waitRemaining) }

    /// Runs `operation` as a child task and returns true when it ended within `seconds`; else
    /// it is cancelled and false is returned once it ended — at once for what `gattway run` bounds
    /// this way: D-Bus calls and waits that end when cancelled. (An operation that ignored
    /// cancellation would hold the stop until the backstop.) The sleep is cancelled as soon as
    /// the operation ends.
    public static func bounded(_ seconds: Double, _ operation: @escaping @Sendable () async -> Void) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await operation()
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .nanoseconds(Int64(saturating: max(0, seconds) * 1e9)))
                return false
            }
            defer { group.cancelAll() }
            return await group.next() ?? false
        }
    }

    /// Calls `warn` after `seconds` unless ``LateWarning/cancel()`` came first: a timer of the
    /// event loop (no task), for a wait of the stop that should end by then.
    public static func warning(after seconds: Double, on loop: EventLoop, _ warn: @escaping @Sendable () -> Void)
        -> LateWarning
    {
        let warning = LateWarning()
        loop.execute { _ = loop.addTimer(after: seconds) { if warning.pending.claim() { warn() } } }
        return warning
    }

    /// See ``warning(after:on:_:)``.
    public final class LateWarning: Sendable {
        fileprivate let pending = OnceFlag()

        /// The wait ended in time: no warning.
        public func cancel() { _ = pending.claim() }
    }

    /// At ``bound`` seconds from now, SIGALRM ends the process — whatever holds up the stop, even
    /// a wedged event loop — with one line on stderr and exit status 1 (`write(2)` and `_exit(2)`
    /// are safe in a signal handler). Nothing else in gattway uses SIGALRM.
    public static func armBackstop() {
        signal(SIGALRM) { _ in
            // Keep the text's "5 s" in step with `bound`.
            let line: StaticString = "<3>stopping took longer than 5 s: exiting now (status 1)\n"
            _ = write(2, line.utf8Start, line.utf8CodeUnitCount)
            _exit(1)
        }
        alarm(bound)
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }
}
