/// An actor whose executor is an ``EventLoop`` (its `unownedExecutor` is
/// `loop.asUnownedSerialExecutor()`), so that code on the loop thread is in its isolation.
package protocol LoopIsolated: Actor {
    nonisolated var loop: EventLoop { get }
}

extension LoopIsolated {
    /// `assumeIsolated`, with the loop's own test of isolation (``EventLoop/inLoop``, what its
    /// `isIsolatingCurrentContext()` answers) made directly. The runtime reaches that test only
    /// after its current-executor and main-executor checks, some 400 instructions a call, and
    /// every message received enters an actor this way two or three times (libdbus's filter, the
    /// prepare hook's dispatch, a signal handler). Traps off the loop thread, as
    /// `assumeIsolated` does.
    @inline(__always)
    package nonisolated func assumeLoopIsolated<T>(
        _ operation: (isolated Self) throws -> T, file: StaticString = #fileID, line: UInt = #line
    ) rethrows -> T {
        loop.preconditionInLoop(file: file, line: line)
        // What `assumeIsolated` itself does once its check passed: call the isolated closure as
        // a plain one (the two have the same representation; only the isolation check differs).
        return try withoutActuallyEscaping(operation) { isolated in
            try unsafeBitCast(isolated, to: ((Self) throws -> T).self)(self)
        }
    }
}
