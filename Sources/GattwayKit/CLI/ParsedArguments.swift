import JSON
import LocalSystem

/// The command line of one subcommand, checked against its declaration.
///
/// Accepts `--name value`, `--name=value`, flags, and `--` to end options. Unknown options,
/// missing values, missing positionals and surplus arguments are usage errors.
struct ParsedArguments: Sendable {
    private(set) var values: [String: [String]] = [:]
    private(set) var flags: Set<String> = []
    private(set) var positionalValues: [String: [String]] = [:]

    init(_ arguments: [String], positionals: [Positional], options: [Option]) throws {
        var loose: [String] = []
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || !argument.hasPrefix("--") || argument == "-" {
                loose.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            var name = String(argument.dropFirst(2))
            var inlineValue: String?
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let option = options.first(where: { $0.name == name }) else {
                throw CLIError.usage("unknown option --\(name)")
            }
            if option.valueName == nil {
                if inlineValue != nil { throw CLIError.usage("--\(name) is a flag and takes no value") }
                flags.insert(name)
                continue
            }
            let value: String
            if let inlineValue {
                value = inlineValue
            } else {
                guard index < arguments.count else {
                    throw CLIError.usage("--\(name) needs a value (\(option.valueName ?? "VALUE"))")
                }
                value = arguments[index]
                index += 1
            }
            if !option.repeatable && values[name] != nil {
                throw CLIError.usage("--\(name) was given more than once")
            }
            values[name, default: []].append(value)
        }
        var remaining = loose[...]
        for positional in positionals {
            if positional.variadic {
                positionalValues[positional.name] = Array(remaining)
                remaining = []
            } else if let first = remaining.first {
                positionalValues[positional.name] = [first]
                remaining = remaining.dropFirst()
            } else if !positional.optional {
                throw CLIError.usage("missing argument \(positional.name)")
            }
        }
        if let extra = remaining.first {
            throw CLIError.usage("unexpected argument \"\(extra)\"")
        }
    }

    /// True when the flag `--name` was given.
    func flag(_ name: String) -> Bool { flags.contains(name) }

    /// The value of `--name`, or nil.
    func value(_ name: String) -> String? { values[name]?.last }

    /// Every value of a repeatable `--name`.
    func allValues(_ name: String) -> [String] { values[name] ?? [] }

    /// The positional argument `name`, or nil when optional and absent.
    func positional(_ name: String) -> String? { positionalValues[name]?.first }

    /// All values of a variadic positional.
    func positionals(_ name: String) -> [String] { positionalValues[name] ?? [] }

    /// `--name` parsed as a duration ("500ms", "30s", "5m", "1h", or plain seconds).
    func duration(_ name: String) throws -> Double? {
        guard let text = value(name) else { return nil }
        guard let seconds = DurationText.seconds(text) else {
            throw CLIError.usage(
                "--\(name): \"\(text)\" is not a duration (expected e.g. 500ms, 30s, 5m; at most \(DurationText.maximumText))"
            )
        }
        return seconds
    }
}

extension ParsedArguments {
    /// `--config`, else ./config.json when present, else /etc/gattway/config.json (`run`,
    /// `doctor`, `proxy reset-key`).
    var configPath: String {
        value("config") ?? (LocalFile.exists("config.json") ? "config.json" : "/etc/gattway/config.json")
    }
}
