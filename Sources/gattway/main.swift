#if canImport(Glibc)
import Glibc
#endif

/// Every subcommand, in the order `gattway --help` lists them.
let commands: [any Command.Type] = [
    RunCommand.self,
    ConfigCheckCommand.self,
    ScanCommand.self,
    InspectCommand.self,
    ReadCommand.self,
    WriteCommand.self,
    NotifyCommand.self,
    DecodeCommand.self,
    SimulateCommand.self,
    DemoCommand.self,
    DoctorCommand.self,
    VersionCommand.self,
]

let code = await CommandLineTool(commands: commands).main(Array(CommandLine.arguments.dropFirst()))
exit(code.rawValue)
