import Gateway

/// Process exit codes, as README.md lists them under "Commands" (the sysexits.h values for
/// usage and config).
public struct ExitCode: RawRepresentable, Hashable, Sendable, Error {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let success = ExitCode(rawValue: 0)
    /// A runtime failure (bus, broker, device).
    public static let failure = ExitCode(rawValue: 1)
    /// `EX_USAGE`: the command line was wrong.
    public static let usage = ExitCode(rawValue: 64)
    /// `EX_CONFIG`: the configuration is invalid.
    public static let config = ExitCode(rawValue: 78)

    /// The exit code of `gattway run` for the error that ended it — the one place that decides:
    /// a configuration file that cannot be read or is invalid, or a configuration BlueZ or the
    /// MQTT client can never accept, is ``config`` (systemd does not restart on 78:
    /// `RestartPreventExitStatus`), anything else ``failure``.
    public init(for error: any Error) {
        switch error {
        case let code as ExitCode: self = code
        case is GatewayConfigError: self = .config
        case let failure as RunFailure: self = failure.isConfiguration ? .config : .failure
        case let start as GatewayStartError: self = start.isConfiguration ? .config : .failure
        default: self = .failure
        }
    }
}

/// An error that ends `gattway run`, with what it means for the exit code (``ExitCode/init(for:)``).
public struct RunFailure: Error, Sendable, CustomStringConvertible {
    public var description: String
    /// The configuration is at fault: starting again would fail the same way (exit 78).
    public var isConfiguration: Bool

    public init(_ description: String, isConfiguration: Bool) {
        self.description = description
        self.isConfiguration = isConfiguration
    }
}
