/// A subcommand of the `gattway` executable, declared as a type (swift-argument-parser's shape,
/// hand-written because the project takes no outside packages).
///
/// The life cycle is parse → validate → run: ``init(parsing:)`` reads the declared options and
/// positionals from ``ParsedArguments`` and throws ``CLIError/usage(_:)`` for anything wrong, so
/// `run()` starts with valid input. Help text is generated from ``name``, ``summary``,
/// ``positionals`` and ``options``.
protocol Command {
    /// The word after `gattway`, e.g. `decode`; nested commands use a space: `config check`.
    static var name: String { get }
    /// One line for the command list.
    static var summary: String { get }
    /// Longer help shown by `gattway NAME --help` below the usage line; may be empty.
    static var discussion: String { get }
    /// Positional arguments in order.
    static var positionals: [Positional] { get }
    /// Options and flags (`--help` is added for every command).
    static var options: [Option] { get }

    init(parsing arguments: ParsedArguments) throws
    /// Runs the command and returns its exit status (``ExitCode``).
    func run() async throws -> ExitCode
}

extension Command {
    static var discussion: String { "" }
    static var positionals: [Positional] { [] }
    static var options: [Option] { [] }
}

/// A declared positional argument.
struct Positional: Sendable {
    var name: String
    var help: String
    var optional: Bool = false
    /// Takes every remaining argument.
    var variadic: Bool = false
}

/// A declared option (`--name VALUE`) or flag (`--name`).
struct Option: Sendable {
    var name: String
    var help: String
    /// The placeholder shown in help for an option that takes a value; nil for a flag.
    var valueName: String? = nil
    /// The default, shown in help.
    var defaultValue: String? = nil
    /// May be given more than once.
    var repeatable: Bool = false

    static func flag(_ name: String, _ help: String) -> Option {
        Option(name: name, help: help)
    }

    static func value(_ name: String, _ valueName: String, _ help: String, default defaultValue: String? = nil)
        -> Option
    {
        Option(name: name, help: help, valueName: valueName, defaultValue: defaultValue)
    }
}

/// An error that ends the command with a message on stderr and a specific exit code.
enum CLIError: Error, CustomStringConvertible {
    /// The command line was wrong (exit 64); the message says what and the usage line follows.
    case usage(String)
    /// The configuration is invalid (exit 78).
    case config(String)
    /// Anything else that stops the command (exit 1).
    case failure(String)

    var description: String {
        switch self {
        case .usage(let message), .config(let message), .failure(let message): message
        }
    }

    var exitCode: ExitCode {
        switch self {
        case .usage: .usage
        case .config: .config
        case .failure: .failure
        }
    }
}
