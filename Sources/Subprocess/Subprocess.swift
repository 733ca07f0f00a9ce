import LocalSystem
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`, for `gattway demo` (its dbus-daemon, mosquitto
/// and gateway) and the tests' daemons (TestSupport's `ChildProcess`).
///
/// The child gets an empty signal mask and default signal dispositions: a child spawned from a
/// Swift concurrency thread (or from a process that blocks or ignores SIGINT/SIGTERM) would
/// otherwise inherit them, and SIGTERM would never reach it. stdin is /dev/null; stdout and
/// stderr go together to a log file. Optionally in its own process group, so a Ctrl-C on the
/// terminal reaches only the parent, which then stops its children in order.
///
/// Nothing here stops the process on release; the owner calls ``stop(grace:)`` (or its async
/// form ``terminate(grace:)``) or ``kill9()``.
public final class Subprocess: Sendable {
    public let pid: pid_t
    public let executable: String
    public let logPath: String
    /// The exit status once reaped (or 128 + signal number), nil while running.
    private let status = Mutex<Int32?>(nil)

    /// Starts `executable` (an absolute path) with `arguments`; `environment` replaces the
    /// inherited one when given. The log file is created (or truncated) with `logMode`.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, logPath: String,
        logMode: mode_t = 0o644, ownProcessGroup: Bool = false
    ) throws(SubprocessError) {
        self.executable = executable
        self.logPath = logPath
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, logMode)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Only 0, 1 and 2 reach the child: a descriptor another thread opened without
        // close-on-exec (a library's socket, a client connection) would otherwise live on in a
        // daemon that runs for minutes, and its peer would never see it closed.
        _ = Self.closeFrom3?(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if ownProcessGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        let environmentLines = (environment ?? LocalEnvironment.all).map { "\($0.key)=\($0.value)" }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environmentLines.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw SubprocessError("cannot start \(executable): \(String(cString: strerror(result)))")
        }
        self.pid = pid
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), looked up at run
    /// time: Swift does not see its declaration (it needs `_GNU_SOURCE`). Nil on an older libc,
    /// where close-on-exec alone keeps descriptors from the child.
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let closeFrom3: AddCloseFrom? = {
        guard let handle = dlopen(nil, RTLD_NOW),
            let symbol = dlsym(handle, "posix_spawn_file_actions_addclosefrom_np")
        else { return nil }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()

    /// False once the process ended (it is reaped then).
    public var isRunning: Bool {
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

    /// The exit status (or 128 + signal number) once it ended, nil while running.
    public var exitStatus: Int32? {
        _ = isRunning
        return status.withLock { $0 }
    }

    /// Sends `number` (e.g. SIGINT to ask for a graceful stop) without waiting.
    public func signal(_ number: Int32) {
        if isRunning { kill(pid, number) }
    }

    /// Blocks until the process ended; returns its status.
    @discardableResult
    public func waitUntilExit() -> Int32 {
        while isRunning { usleep(5_000) }
        return exitStatus ?? -1
    }

    /// SIGTERM, up to `grace` seconds to exit, then SIGKILL; reaps it. Blocks the calling
    /// thread; safe to call more than once.
    public func stop(grace: Double = 3) {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(grace)
        while isRunning && ContinuousClock.now < deadline { usleep(5_000) }
        if isRunning { kill(pid, SIGKILL) }
        waitUntilExit()
    }

    /// The same as ``stop(grace:)`` without blocking a thread (sleeps between checks).
    public func terminate(grace: Double = 3) async {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(grace)
        while isRunning && ContinuousClock.now < deadline { try? await Task.sleep(nanoseconds: 10_000_000) }
        if isRunning { kill(pid, SIGKILL) }
        while isRunning { try? await Task.sleep(nanoseconds: 5_000_000) }
    }

    /// SIGKILL, as a crash would, and waits for it.
    public func kill9() {
        guard isRunning else { return }
        kill(pid, SIGKILL)
        waitUntilExit()
    }

    /// Everything the process printed so far.
    public func log() -> String {
        LocalFile.readText(logPath) ?? ""
    }

    /// The absolute path of `name` on PATH or in the sbin directories (where Debian puts
    /// mosquitto); an absolute `name` is returned unchanged when executable. Nil when not found.
    public static func find(_ name: String) -> String? {
        if name.hasPrefix("/") { return LocalFile.isExecutable(name) ? name : nil }
        let path = LocalEnvironment.value("PATH") ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":").map(String.init) + [
            "/usr/sbin", "/sbin", "/usr/bin", "/usr/local/sbin",
        ] {
            let candidate = directory + "/" + name
            if LocalFile.isExecutable(candidate) { return candidate }
        }
        return nil
    }
}

/// Why a process could not be started.
public struct SubprocessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
