/// Why a command was refused or failed; the text goes into the response's `error`.
public struct CommandError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
