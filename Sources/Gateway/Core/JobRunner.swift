import EventLoop

/// The core's long operations — connects, GATT reads and writes, peripheral port calls — as jobs.
///
/// A job is an async closure that talks to a port and returns what came of it; it never touches
/// the core's state. ``Gateway/run()`` runs each as a child task of its task group, on the event
/// loop (executor preference), so the port calls it makes are no thread hops either; the result
/// comes back to the core as a ``CoreEvent/completed(_:)`` event. Jobs are cancelled when the
/// gateway stops. Loop-confined.
final class JobRunner {
    typealias Job = @Sendable () async -> JobCompletion

    /// Jobs handed to ``Gateway/run()``'s task group, in order.
    let stream: AsyncStream<Job>
    private let continuation: AsyncStream<Job>.Continuation
    /// Jobs spawned whose completion has not been handled yet.
    private(set) var inFlight = 0

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: Job.self)
    }

    /// Starts `job` (when ``Gateway/run()`` runs; jobs spawned before wait for it).
    func spawn(_ job: @escaping Job) {
        inFlight += 1
        if case .terminated = continuation.yield(job) { inFlight -= 1 }
    }

    /// A job's completion was handled (or it ended without one).
    func finished() {
        inFlight = max(0, inFlight - 1)
    }

    /// No more jobs: those spawned later are dropped.
    func close() {
        continuation.finish()
    }
}
