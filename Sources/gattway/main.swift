#if canImport(Glibc)
import Glibc
#endif

/// Every subcommand, in the order `gattway --help` lists them.
let commands: [any Command.Type] = [
    DecodeCommand.self,
    VersionCommand.self,
    SimulateCommand.self,
]

let code = await CommandLineTool(commands: commands).main(Array(CommandLine.arguments.dropFirst()))
exit(code.rawValue)
