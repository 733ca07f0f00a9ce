/// Why ``Gateway/start()`` could not start (a port refused what the configuration asks for).
public struct GatewayStartError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
