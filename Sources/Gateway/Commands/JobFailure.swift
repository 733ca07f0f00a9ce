/// How a queued job ended when it did not succeed (the response `status`).
enum JobFailure: Error, Sendable {
    /// Not started within its TTL.
    case expired
    /// A GATT operation (or connecting) took too long.
    case timeout(String)
    /// Anything else, with the error text and the device's ATT error code if it answered with one.
    case error(String, attError: UInt8? = nil)
}
