#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// A process `gattway demo` starts (dbus-daemon, mosquitto, the gateway) and must stop.
///
/// Spawned with `posix_spawn`, an empty signal mask and default signal dispositions (the
/// demo's own threads block or ignore SIGINT/SIGTERM, which children would otherwise inherit),
/// in its own process group so Ctrl-C reaches only the demo, which then stops its children in
/// order. Output (stdout and stderr) goes to a log file.
final class DemoChild: Sendable {
    let name: String
    let pid: pid_t
    let logPath: String
    /// The exit status once reaped (or 128 + signal), nil while running.
    private let status = Mutex<Int32?>(nil)

    /// Starts `path` with `arguments`; `environment` replaces the inherited one when given.
    init(name: String, path: String, arguments: [String], environment: [String: String]? = nil, logPath: String) throws {
        self.name = name
        self.logPath = logPath
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        let environmentLines = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environmentLines.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard result == 0 else { throw CLIError.failure("cannot start \(name) (\(path)): \(String(cString: strerror(result)))") }
        self.pid = pid
    }

    var isRunning: Bool {
        status.withLock { status in
            if status != nil { return false }
            var raw: Int32 = 0
            let result = waitpid(pid, &raw, WNOHANG)
            if result == pid {
                let signal = raw & 0x7F
                status = signal == 0 ? (raw >> 8) & 0xFF : 128 + signal
                return false
            }
            return result == 0
        }
    }

    /// The exit status (or 128 + signal) once it ended.
    var exitStatus: Int32? {
        _ = isRunning
        return status.withLock { $0 }
    }

    /// SIGTERM, up to `grace` seconds to exit, then SIGKILL; reaps the process. Safe to call twice.
    func stop(grace: Double = 5) async {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(grace)
        while isRunning && Date() < deadline { try? await Task.sleep(nanoseconds: 10_000_000) }
        if isRunning { kill(pid, SIGKILL) }
        while isRunning { try? await Task.sleep(nanoseconds: 5_000_000) }
    }

    /// What the process printed so far.
    func log() -> String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    }

    /// The last `count` lines of the log, indented, for an error message.
    func logTail(_ count: Int = 15) -> String {
        log().split(separator: "\n").suffix(count).map { "    " + $0 }.joined(separator: "\n")
    }

    /// The absolute path of `name` on PATH or in the sbin directories (where Debian puts
    /// mosquitto), nil when it is not installed.
    static func find(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin", "/usr/bin", "/usr/local/sbin"] {
            let candidate = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}
