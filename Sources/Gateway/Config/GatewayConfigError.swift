import JSON

/// config.json is invalid: every problem found, each naming its JSON path and what was expected.
public struct GatewayConfigError: Error, Sendable, CustomStringConvertible {
    public var problems: [JSONPathError]

    public init(problems: [JSONPathError]) { self.problems = problems }

    /// One line per problem.
    public var lines: [String] { problems.map(\.description) }

    public var description: String { lines.joined(separator: "\n") }
}
