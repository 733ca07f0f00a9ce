#if canImport(Glibc)
    import Glibc
#endif

/// The `gattway` command tree: finds the subcommand, prints generated help, maps errors to exit
/// codes (0 ok, 1 runtime failure, 64 usage, 78 config).
struct CommandLineTool {
    let commands: [any Command.Type]

    /// Runs the tool for `arguments` (without the program name) and returns the exit code.
    func main(_ arguments: [String]) async -> ExitCode {
        if arguments.isEmpty || arguments == ["--help"] || arguments == ["-h"] || arguments == ["help"] {
            standardOutput(overview())
            return .success
        }
        if arguments.first == "help", arguments.count > 1 {
            return await main(Array(arguments.dropFirst()) + ["--help"])
        }
        if arguments == ["--version"] {
            return await main(["version"])
        }
        guard let (command, rest) = resolve(arguments) else {
            standardError("gattway: unknown command \"\(arguments[0])\"\n\n" + overview())
            return .usage
        }
        if rest.contains("--help") || rest.contains("-h") {
            standardOutput(Self.help(for: command))
            return .success
        }
        do {
            let parsed = try ParsedArguments(rest, positionals: command.positionals, options: command.options)
            let instance = try command.init(parsing: parsed)
            return try await instance.run()
        } catch let error as CLIError {
            var message = "gattway \(command.name): \(error)\n"
            if case .usage = error { message += "usage: \(Self.usageLine(for: command))\n" }
            standardError(message)
            return error.exitCode
        } catch let code as ExitCode {
            return code
        } catch {
            standardError("gattway \(command.name): \(error)\n")
            return .failure
        }
    }

    /// The longest command name that prefixes the arguments (so `config check` beats `config`).
    private func resolve(_ arguments: [String]) -> (any Command.Type, [String])? {
        var best: (any Command.Type, Int)?
        for command in commands {
            let words = command.name.split(separator: " ").map(String.init)
            guard arguments.count >= words.count, Array(arguments.prefix(words.count)) == words else { continue }
            if best == nil || words.count > best!.1 { best = (command, words.count) }
        }
        guard let (command, count) = best else { return nil }
        return (command, Array(arguments.dropFirst(count)))
    }

    func overview() -> String {
        var text = """
            gattway \(BuildInfo.version): a Bluetooth LE → MQTT gateway for BlueZ on Linux.

            usage: gattway <command> [options]

            commands:

            """
        let width = (commands.map { $0.name.count }.max() ?? 0) + 2
        for command in commands {
            text += "  " + command.name.padding(to: width) + command.summary + "\n"
        }
        text += "\nRun `gattway <command> --help` for a command's options.\n"
        text += "Exit codes: 0 ok, 1 runtime failure, 64 usage error, 78 configuration error.\n"
        return text
    }

    static func usageLine(for command: any Command.Type) -> String {
        var parts = ["gattway", command.name]
        if !command.options.isEmpty { parts.append("[options]") }
        for positional in command.positionals {
            var word = positional.name.uppercased()
            if positional.variadic { word += "..." }
            parts.append(positional.optional ? "[\(word)]" : word)
        }
        return parts.joined(separator: " ")
    }

    static func help(for command: any Command.Type) -> String {
        var text = "\(command.summary)\n\nusage: \(usageLine(for: command))\n"
        if !command.discussion.isEmpty { text += "\n\(command.discussion)\n" }
        var rows: [(String, String)] = command.positionals.map { ($0.name.uppercased(), $0.help) }
        if !rows.isEmpty {
            text += "\narguments:\n" + table(rows)
        }
        rows = command.options.map { option in
            var left = "--\(option.name)"
            if let valueName = option.valueName { left += " \(valueName)" }
            var right = option.help
            if let defaultValue = option.defaultValue { right += " (default: \(defaultValue))" }
            if option.repeatable { right += " (repeatable)" }
            return (left, right)
        }
        rows.append(("--help", "Show this help."))
        text += "\noptions:\n" + table(rows)
        return text
    }

    private static func table(_ rows: [(String, String)]) -> String {
        let width = (rows.map(\.0.count).max() ?? 0) + 2
        return rows.map { "  " + $0.0.padding(to: width) + $0.1 + "\n" }.joined()
    }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}

/// Writes to stdout unbuffered (each call is one or more `write(2)`s), so output interleaves
/// correctly with stderr and reaches a pipe at once.
func standardOutput(_ text: String) {
    writeAll(1, text)
}

/// Writes to stderr unbuffered.
func standardError(_ text: String) {
    writeAll(2, text)
}

private func writeAll(_ fd: Int32, _ text: String) {
    var text = text
    text.withUTF8 { buffer in
        var offset = 0
        while offset < buffer.count {
            let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return  // a closed pipe: nothing sensible to do with the error
            }
            offset += written
        }
    }
}
