/// A job waiting for its device to connect; expired by the timer at `expiresAt`.
struct ConnectionWaiter {
    var id: UInt64
    var expiresAt: Double?
    var continuation: CheckedContinuation<Void, any Error>
}
