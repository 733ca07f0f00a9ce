#if canImport(Glibc)
import Glibc
#endif

/// Every subcommand, in the order `gattway --help` lists them.
let commands: [any Command.Type] = [
    DecodeCommand.self,
    VersionCommand.self,
    SimulateCommand.self,
    ConfigCheckCommand.self,
    ScanCommand.self,
    InspectCommand.self,
    ReadCommand.self,
    WriteCommand.self,
    NotifyCommand.self,
]

let code = await CommandLineTool(commands: commands).main(Array(CommandLine.arguments.dropFirst()))
exit(code.rawValue)
