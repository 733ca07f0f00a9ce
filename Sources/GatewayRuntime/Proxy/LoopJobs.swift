import EventLoop

/// The long operations of the composition root's glue around the core (the Bluetooth proxy's
/// BlueZ calls), as jobs the way the core runs its own (docs/architecture.md, "The gateway core:
/// events and jobs"): each a child task of the one task group ``run()`` holds, on the event loop
/// (executor preference), whose outcome goes back to the loop as an event. Spawning is callable
/// from any thread; jobs spawned before ``run()`` starts wait for it. ``close()`` ends the group:
/// the jobs still running are cancelled and ``run()`` returns once they ended; so does
/// cancelling the task running ``run()``.
final class LoopJobs: Sendable {
    typealias Job = @Sendable () async -> Void

    let loop: EventLoop
    private let stream: AsyncStream<Job>
    private let continuation: AsyncStream<Job>.Continuation

    init(loop: EventLoop) {
        self.loop = loop
        (stream, continuation) = AsyncStream.makeStream(of: Job.self)
    }

    /// Starts `job` as a child task of ``run()``'s group; dropped after ``close()``.
    func spawn(_ job: @escaping Job) {
        continuation.yield(job)
    }

    /// No more jobs; those running are cancelled.
    func close() {
        continuation.finish()
    }

    /// Runs the jobs until ``close()`` or until the calling task is cancelled; call once.
    func run() async {
        let executor = loop.taskExecutor
        let jobs = stream
        await withTaskExecutorPreference(executor) {
            await withDiscardingTaskGroup { group in
                for await job in jobs {
                    group.addTask(executorPreference: executor) { await job() }
                }
                group.cancelAll()
            }
        }
    }
}
