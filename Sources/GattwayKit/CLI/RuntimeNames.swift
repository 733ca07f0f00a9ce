import GatewayRuntime

// Names every command of the executable shares with the runtime library (GatewayRuntime), so
// that each file does not need the import: the exit codes, the version, the signal sources.
typealias ExitCode = GatewayRuntime.ExitCode
typealias BuildInfo = GatewayRuntime.BuildInfo
typealias SignalSources = GatewayRuntime.SignalSources
