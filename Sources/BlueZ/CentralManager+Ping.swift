import DBus
import EventLoop
import Synchronization

/// The latest D-Bus round trip to bluetoothd, readable from any thread (a health report reads
/// it without waiting for the central's actor).
final class RoundTripRecord: Sendable {
    private struct State {
        var latest: Duration?
        var pinging = false
    }

    private let state = Mutex(State())

    var latest: Duration? { state.withLock { $0.latest } }

    func record(_ roundTrip: Duration?) { state.withLock { $0.latest = roundTrip } }

    /// True for the first caller only (one periodic pinger per central).
    func claimPinger() -> Bool {
        state.withLock { state in
            defer { state.pinging = true }
            return !state.pinging
        }
    }
}

extension CentralManager {
    /// Measures one D-Bus round trip to bluetoothd: `org.freedesktop.DBus.Peer.Ping` to the
    /// unique name that owns `org.bluez` (so a bus that would start bluetoothd on demand does
    /// not), answered by libdbus inside bluetoothd's main loop — the bus and the daemon's
    /// responsiveness, without touching any BlueZ object or the radio. Timed on the event loop
    /// (monotonic clock) from sending the call to this actor running again with the reply, so a
    /// busy loop shows too. The result is kept as ``lastRoundTrip``.
    ///
    /// - Throws: ``CentralError`` ``CentralError/Code/bluezUnavailable`` when bluetoothd is not on
    ///   the bus, the call's error otherwise (`NoReply` after `timeout`); either clears
    ///   ``lastRoundTrip``.
    public func ping(timeout: Duration = .seconds(5)) async throws -> Duration {
        let operation = "org.freedesktop.DBus.Peer.Ping to bluetoothd"
        if closed { throw closedError(operation) }
        guard let owner = bluezOwner else {
            roundTrips.record(nil)
            throw CentralError(
                .bluezUnavailable, operation: operation, message: "bluetoothd (org.bluez) is not on the bus")
        }
        let start = EventLoop.now()
        do {
            _ = try await connection.call(
                destination: owner, path: .root, interface: "org.freedesktop.DBus.Peer", method: "Ping",
                timeout: timeout)
        } catch {
            roundTrips.record(nil)
            throw CentralError.wrap(error, operation: operation)
        }
        let roundTrip = Duration.nanoseconds(Int64(clamping: EventLoop.now() - start))
        roundTrips.record(roundTrip)
        return roundTrip
    }

    /// The round trip of the last successful ``ping(timeout:)`` to the bluetoothd now on the bus;
    /// nil before the first, after a ping failed and as soon as bluetoothd left the bus.
    public nonisolated var lastRoundTrip: Duration? { roundTrips.latest }

    /// Pings bluetoothd now and then every `interval` until ``close()``, so ``lastRoundTrip``
    /// stays current for readers that must not wait (`gattway run` pings once per
    /// `health.interval` for `bridge/health`). A second call does nothing.
    public func startPinging(every interval: Duration) {
        guard !closed, roundTrips.claimPinger() else { return }
        let timeout = min(max(interval, .seconds(1)), .seconds(10))
        Task { [weak self] in
            while let central = self, await central.pingIfOpen(timeout: timeout) {
                try? await Task.sleep(for: interval)
            }
        }
    }

    /// One ping unless closed (errors are kept as a missing ``lastRoundTrip``); false once closed.
    private func pingIfOpen(timeout: Duration) async -> Bool {
        guard !closed else { return false }
        _ = try? await ping(timeout: timeout)
        return true
    }
}
