import Subprocess

/// A process `gattway demo` starts (dbus-daemon, mosquitto, the gateway) and must stop: a
/// ``Subprocess`` (empty signal mask, default dispositions, output to a log file) in its own
/// process group, so Ctrl-C reaches only the demo, which then stops its children in order.
final class DemoChild: Sendable {
    let name: String
    private let process: Subprocess

    /// Starts `path` with `arguments`; `environment` replaces the inherited one when given.
    init(name: String, path: String, arguments: [String], environment: [String: String]? = nil, logPath: String) throws
    {
        self.name = name
        do {
            process = try Subprocess(
                path, arguments, environment: environment, logPath: logPath, logMode: 0o600, ownProcessGroup: true)
        } catch {
            throw CLIError.failure("\(name): \(error.description)")
        }
    }

    var pid: Int32 { process.pid }
    var logPath: String { process.logPath }
    var isRunning: Bool { process.isRunning }
    /// The exit status (or 128 + signal) once it ended.
    var exitStatus: Int32? { process.exitStatus }

    /// SIGTERM, up to `grace` seconds to exit, then SIGKILL; reaps the process. Safe to call twice.
    func stop(grace: Double = 5) async { await process.terminate(grace: grace) }

    /// What the process printed so far.
    func log() -> String { process.log() }

    /// The last `count` lines of the log, indented, for an error message.
    func logTail(_ count: Int = 15) -> String {
        log().split(separator: "\n").suffix(count).map { "    " + $0 }.joined(separator: "\n")
    }

    /// The absolute path of `name` on PATH or in the sbin directories (where Debian puts
    /// mosquitto), nil when it is not installed.
    static func find(_ name: String) -> String? { Subprocess.find(name) }
}
