import FIFOQueue
import Synchronization

/// The values of a characteristic's notifications with flow control instead of dropping:
/// what ``CentralManager/notifications(for:pausingAbove:)`` returns.
///
/// Nothing is dropped. When `pausingAbove` values wait for the consumer, the central stops
/// reading the characteristic's `AcquireNotify` socket, so further values wait in the kernel's
/// socket buffer and then with the sender, until the consumer has taken half of them. Values that
/// arrive as D-Bus signals (`StartNotify`: indications, or a BlueZ without `NotifyAcquired`) are
/// never paused — that would stall every other BlueZ message on the connection — so there the
/// buffer grows past the mark instead.
///
/// The consumer must keep iterating (or end the iteration: dropping the sequence or cancelling
/// the task unsubscribes like ``CentralManager/notifications(for:bufferingNewest:)``). One
/// consumer per sequence.
public struct NotificationValues: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    final class Handle: Sendable {
        let channel: NotificationChannel
        init(_ channel: NotificationChannel) { self.channel = channel }
        deinit { channel.terminate() }
    }

    let handle: Handle

    public struct AsyncIterator: AsyncIteratorProtocol {
        let handle: Handle

        /// The next value; nil when the subscription ended; throws what ended it with an error.
        public mutating func next() async throws -> [UInt8]? {
            try await handle.channel.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(handle: handle) }
}

/// The bounded hand-off between the central (producer, on the loop thread) and one consumer
/// task. Thread-safe.
package final class NotificationChannel: Sendable {
    private struct State {
        var values = FIFO<[UInt8]>()
        var waiter: CheckedContinuation<[UInt8]?, any Error>?
        var end: Result<Void, any Error>?
        /// The producer was told to pause and has not been told to resume.
        var paused = false
        var onTerminate: (@Sendable () -> Void)?

        var depth: Int { values.count }
    }

    /// Depth at which ``push(_:)`` asks the producer to pause; it resumes at half of it.
    let highWater: Int
    private let state = Mutex(State())
    /// Called from the consumer's thread when it drained a paused channel to half.
    private let onResume: @Sendable () -> Void

    package init(highWater: Int, onResume: @escaping @Sendable () -> Void) {
        self.highWater = max(1, highWater)
        self.onResume = onResume
    }

    /// Runs once when the consumer ends (set by the central when it registers the consumer).
    func setOnTerminate(_ body: @escaping @Sendable () -> Void) {
        state.withLock { $0.onTerminate = body }
    }

    /// True while the producer should not read more for this consumer.
    package var isPaused: Bool { state.withLock { $0.paused } }

    /// Hands `value` to the consumer; true when `highWater` values wait (the producer should
    /// pause reading until ``onResume`` runs).
    package func push(_ value: [UInt8]) -> Bool {
        let (waiter, pause): (CheckedContinuation<[UInt8]?, any Error>?, Bool) = state.withLock { state in
            guard state.end == nil else { return (nil, false) }
            if let waiter = state.waiter {
                state.waiter = nil
                return (waiter, false)
            }
            state.values.append(value)
            if state.depth >= highWater { state.paused = true }
            return (nil, state.paused)
        }
        waiter?.resume(returning: value)
        return pause
    }

    /// Ends the stream after the values already waiting (with `error`, if any).
    package func finish(throwing error: (any Error)?) {
        let waiter: CheckedContinuation<[UInt8]?, any Error>? = state.withLock { state in
            guard state.end == nil else { return nil }
            state.end = error.map { .failure($0) } ?? .success(())
            defer { state.waiter = nil }
            return state.waiter
        }
        if let error { waiter?.resume(throwing: error) } else { waiter?.resume(returning: nil) }
    }

    /// The consumer went away (cancelled, or the sequence was released): drop what waits and
    /// tell the central once.
    package func terminate() {
        let (waiter, onTerminate): (CheckedContinuation<[UInt8]?, any Error>?, (@Sendable () -> Void)?) = state.withLock
        { state in
            if state.end == nil { state.end = .success(()) }
            state.values.removeAll()
            state.paused = false
            defer {
                state.waiter = nil
                state.onTerminate = nil
            }
            return (state.waiter, state.onTerminate)
        }
        waiter?.resume(returning: nil)
        onTerminate?()
    }

    private enum Step {
        case value([UInt8], resume: Bool)
        case end(Result<Void, any Error>)
        case wait
    }

    /// Takes the oldest value (called with the lock held).
    private static func take(_ state: inout State, highWater: Int) -> Step {
        if let value = state.values.popFirst() {
            let resume = state.paused && state.depth <= highWater / 2
            if resume { state.paused = false }
            return .value(value, resume: resume)
        }
        if let end = state.end { return .end(end) }
        return .wait
    }

    package func next() async throws -> [UInt8]? {
        let highWater = self.highWater
        switch state.withLock({ Self.take(&$0, highWater: highWater) }) {
        case .value(let value, let resume):
            if resume { onResume() }
            return value
        case .end(let end):
            try end.get()
            return nil
        case .wait:
            break
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8]?, any Error>) in
                let step: Step = state.withLock { state in
                    let step = Self.take(&state, highWater: highWater)
                    if case .wait = step { state.waiter = continuation }
                    return step
                }
                switch step {
                case .value(let value, let resume):
                    if resume { onResume() }
                    continuation.resume(returning: value)
                case .end(.success):
                    continuation.resume(returning: nil)
                case .end(.failure(let error)):
                    continuation.resume(throwing: error)
                case .wait:
                    break
                }
            }
        } onCancel: {
            terminate()
        }
    }
}
