/// Why ``Gateway/start()`` could not start (a port refused what the configuration asks for).
public struct GatewayStartError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    /// True when the configuration itself is at fault (``BLEPortError/Kind/invalidConfiguration``):
    /// starting again would fail the same way, so `gattway run` exits 78 like for a bad config.
    public var isConfiguration: Bool

    public init(_ message: String, isConfiguration: Bool = false) {
        self.message = message
        self.isConfiguration = isConfiguration
    }

    public var description: String { message }
}
