import Foundation
import Subprocess

/// A daemon or tool started by a test, stopped (SIGTERM, then SIGKILL) by ``stop()`` or when the
/// value is released, so a failing test never leaves processes behind.
///
/// Started by ``Subprocess`` (`posix_spawn` with an empty signal mask and default dispositions:
/// a child spawned from a Swift concurrency thread would otherwise inherit that thread's blocked
/// signals, and SIGTERM would never reach it). Output (stdout and stderr together) goes to a log
/// file in a private temporary directory, so a failing test can show it with ``log()``.
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

    deinit { stop() }

    public var pid: Int32 { child.pid }

    /// Compatibility with code written against Foundation's `Process`.
    public var process: ChildProcess { self }

    /// The exit status (or 128 + signal number); -1 while running.
    public var terminationStatus: Int32 { child.exitStatus ?? -1 }

    public var isRunning: Bool { child.isRunning }

    /// Waits for the process to end and returns its status.
    @discardableResult
    public func waitUntilExit() -> Int32 { child.waitUntilExit() }

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
    public func waitForOutput(containing text: String, timeout: Double = 10) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if log().contains(text) { return }
            if !isRunning {
                throw ChildProcessError("\(executable) exited (status \(terminationStatus)) before printing \"\(text)\":\n\(log())")
            }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        throw ChildProcessError("\(executable) did not print \"\(text)\" within \(timeout) s:\n\(log())")
    }

    /// Runs a command to completion and returns its exit status and combined output.
    @discardableResult
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        input: Data? = nil
    ) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try resolve(executable))
        process.arguments = arguments
        if let environment { process.environment = environment }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        let inputPipe = Pipe()
        process.standardInput = input == nil ? FileHandle.nullDevice : inputPipe
        try process.run()
        if let input {
            inputPipe.fileHandleForWriting.write(input)
            try inputPipe.fileHandleForWriting.close()
        }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
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
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ChildProcessError("socket() failed: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw ChildProcessError("bind() failed: errno \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return UInt16(bigEndian: address.sin_port)
    }
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
