/// The store-and-forward queue file could not be opened or written: which file, which
/// operation, and the `errno` text.
public struct StoreAndForwardError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
