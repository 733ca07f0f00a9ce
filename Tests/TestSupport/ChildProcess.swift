import Foundation
import Subprocess

/// A daemon or tool started by a test, stopped (SIGTERM, then SIGKILL) by ``stop()`` or when the
/// value is released, so a failing test never leaves processes behind.
///
/// Started by ``Subprocess`` (`posix_spawn` with an empty signal mask and default dispositions:
/// a child spawned from a Swift concurrency thread would otherwise inherit that thread's blocked
/// signals, and SIGTERM would never reach it). Output (stdout and stderr together) goes to a log
/// file in a private temporary directory, so a failing test can show it with ``log()``; the
/// directory goes with the value.
public final class ChildProcess: Sendable {
    public let logURL: URL
    public let executable: String
    private let child: Subprocess

    /// Starts `executable` (an absolute path, or a name looked up on PATH) with `arguments`;
    /// `environment` replaces the inherited one when given.
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        self.executable = executable
        let dir = try TemporaryDirectory.make(prefix: "child")
        logURL = dir.appendingPathComponent("output.log")
        let path = try Self.resolve(executable)
        do {
            child = try Subprocess(path, arguments, environment: environment, logPath: logURL.path)
        } catch {
            throw ChildProcessError(error.description)
        }
    }

    /// Stops the process and removes its log directory (nothing can read the log afterwards).
    deinit {
        stop()
        try? FileManager.default.removeItem(at: logURL.deletingLastPathComponent())
    }

    public var pid: Int32 { child.pid }

    /// Compatibility with code written against Foundation's `Process`.
    public var process: ChildProcess { self }

    /// The exit status (or 128 + signal number); -1 while running.
    public var terminationStatus: Int32 { child.exitStatus ?? -1 }

    public var isRunning: Bool { child.isRunning }

    /// Waits for the process to end and returns its status. Polls with `Task.sleep` instead of
    /// blocking: the cooperative pool has one thread per core, and a test blocking one (while
    /// hundreds of tests run at once on a 2-core machine) stalls every other test's tasks —
    /// including an in-process simulator that the awaited child may be talking to.
    @discardableResult
    public func exited() async throws -> Int32 {
        while isRunning { try await Task.sleep(nanoseconds: 5_000_000) }
        return terminationStatus
    }

    /// Sends SIGTERM, waits up to `grace` seconds, then SIGKILL. Safe to call more than once.
    public func stop(grace: Double = 3) { child.stop(grace: grace) }

    /// Sends a signal (e.g. SIGINT to ask for a graceful stop) without waiting.
    public func signal(_ number: Int32) { child.signal(number) }

    /// Kills the process with SIGKILL, as a crash would, and waits for it.
    public func kill9() { child.kill9() }

    /// Everything the process printed so far.
    public func log() -> String {
        (try? String(contentsOf: logURL, encoding: .utf8)) ?? ""
    }

    /// Waits until the process's output contains `text`; throws with the log when it does not
    /// appear within `timeout` seconds or the process exits first.
    /// The output is checked once more after the deadline, so a task that was not scheduled for a
    /// while (hundreds of tests share two cores) does not fail on output that is there.
    public func waitForOutput(containing text: String, timeout: Double = 30) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if log().contains(text) { return }
            if !isRunning {
                throw ChildProcessError(
                    "\(executable) exited (status \(terminationStatus)) before printing \"\(text)\":\n\(log())")
            }
            if Date() >= deadline { break }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        throw ChildProcessError("\(executable) did not print \"\(text)\" within \(timeout) s:\n\(log())")
    }

    /// Runs a command to completion and returns its exit status and combined output (stdin is
    /// /dev/null). Waits as ``exited()`` does, without holding a thread.
    @discardableResult
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil
    ) async throws -> (status: Int32, output: String) {
        let child = try ChildProcess(executable, arguments, environment: environment)
        let status = try await child.exited()
        let output = child.log()
        try? FileManager.default.removeItem(at: child.logURL.deletingLastPathComponent())
        return (status, output)
    }

    /// Finds `name` on PATH (and in /usr/sbin, where Debian puts mosquitto), or returns an
    /// absolute path unchanged.
    public static func resolve(_ name: String) throws -> String {
        if name.hasPrefix("/") { return name }
        if let found = Subprocess.find(name) { return found }
        throw ChildProcessError("\(name) not found on PATH; run `make deps` to install the test daemons")
    }
}

/// Why a child process could not be started or did not become ready.
public struct ChildProcessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Private temporary directories for test daemons (sockets, configs, logs).
public enum TemporaryDirectory {
    /// Creates a fresh directory under the system temporary directory.
    public static func make(prefix: String) throws -> URL {
        let base = FileManager.default.temporaryDirectory
        let url = base.appendingPathComponent("gattway-\(prefix)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// Loopback TCP ports for test brokers.
public enum FreePort {
    /// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, closed).
    public static func tcp() throws -> UInt16 {
        let (fd, port) = try bindLoopback()
        close(fd)
        return port
    }

    /// A socket bound to a free port on 127.0.0.1 and the port.
    static func bindLoopback() throws -> (fd: Int32, port: UInt16) {
        do {
            return try LoopbackPort.bind()
        } catch {
            throw ChildProcessError("\(error)")
        }
    }
}

/// A port on 127.0.0.1 where nothing accepts connections (they are refused) for as long as the
/// value lives: bound, never listening. A port from ``FreePort/tcp()`` is free again at once, and
/// another test's broker may take it meanwhile.
public final class RefusingPort: Sendable {
    public let port: UInt16
    private let fd: Int32

    public init() throws { (fd, port) = try FreePort.bindLoopback() }

    deinit { close(fd) }
}

/// Executables that `swift build` put next to the test bundle (the same build directory).
public enum BuiltProduct {
    /// The absolute path of the executable product `name` of this package, e.g. `gattway`.
    public static func path(_ name: String) throws -> String {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        // The test binary is either `.build/debug/gattwayPackageTests.xctest` (a file on Linux)
        // or something inside it; walk up until the product is found.
        for _ in 0..<4 {
            dir = dir.deletingLastPathComponent()
            let candidate = dir.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw ChildProcessError("executable \(name) not found next to the tests; run `swift build` first")
    }
}
