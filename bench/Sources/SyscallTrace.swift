import Foundation
import TestSupport

/// Threads of another process from /proc/PID/task.
enum ProcessThreads {
    /// The thread ids of `pid` now.
    static func ids(_ pid: Int32) -> [Int32] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return names.compactMap { Int32($0) }.sorted()
    }

    /// The `TracerPid` of one thread (0 when nothing traces it, nil when it is gone).
    static func tracer(_ pid: Int32, thread: Int32) -> Int32? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/status", encoding: .utf8) else {
            return nil
        }
        for line in status.split(separator: "\n") where line.hasPrefix("TracerPid:") {
            return Int32(line.dropFirst("TracerPid:".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// Time on a CPU of each live thread of `pid`, in nanoseconds (the first field of
    /// /proc/PID/task/TID/schedstat): finer than the 10 ms ticks of /proc/PID/stat.
    static func onCPUNanoseconds(_ pid: Int32) -> [Int32: UInt64] {
        var result: [Int32: UInt64] = [:]
        for thread in ids(pid) {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/schedstat", encoding: .utf8),
                let first = text.split(separator: " ").first, let nanoseconds = UInt64(first)
            else { continue }
            result[thread] = nanoseconds
        }
        return result
    }

    /// CPU time between two ``onCPUNanoseconds(_:)`` samples of the threads alive at the second
    /// (a thread that exited in between is missing, its time only in /proc/PID/stat).
    static func onCPUNanoseconds(from start: [Int32: UInt64], to end: [Int32: UInt64]) -> UInt64 {
        end.reduce(0) { total, thread in total + (thread.value - min(thread.value, start[thread.key, default: 0])) }
    }
}

/// System calls of a process over a window, counted by `strace -c -f` attached to every thread.
struct SyscallCounts: Sendable {
    /// Calls by system call name (the rows of strace's summary table, without `total`).
    var byName: [String: Int]
    /// Threads of the process when strace had attached, and how many of them it traced.
    var threads: Int
    var traced: Int
    /// How strace was attached: `-f -p PID`, or every thread id when that did not reach them all.
    var attachment: String
    /// Length of the window, from "every thread traced" to SIGINT.
    var seconds: Double

    var total: Int { byName.values.reduce(0, +) }
    var futex: Int { byName["futex", default: 0] + byName["futex_waitv", default: 0] }

    /// The `count` most frequent system calls, "futex 1200, write 800, …".
    func top(_ count: Int) -> String {
        byName.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.prefix(count)
            .map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }
}

/// Counts the system calls of a running process with `strace -c -f`.
///
/// strace stops each traced thread at every system call, so the process runs slower while it is
/// attached: measure CPU in another window, never in this one. `strace -f -p PID` attaches to
/// every thread of PID (strace(1): "-p PID -f will attach all threads of process PID"); the
/// window starts only once `TracerPid` of every thread in /proc/PID/task names strace, and when
/// that does not happen, strace is started again with every thread id (`-p TID,TID,…`).
enum SyscallTrace {
    /// Runs `body` while strace counts the system calls of `pid`; returns the counts and the
    /// result of `body`.
    static func measure<T>(_ pid: Int32, _ body: () async throws -> T) async throws -> (SyscallCounts, T) {
        let executable = try ChildProcess.resolve("strace")
        let dir = try TemporaryDirectory.make(prefix: "bench-strace")
        defer { try? FileManager.default.removeItem(at: dir) }
        let output = dir.appendingPathComponent("summary.txt").path
        var attachment = "-f -p PID"
        var strace = try ChildProcess(executable, ["-c", "-f", "-o", output, "-p", String(pid)])
        var coverage = try await waitUntilTraced(pid, by: strace)
        if coverage.traced < coverage.threads {
            try await finish(strace)
            let threads = ProcessThreads.ids(pid)
            attachment = "-f -p with \(threads.count) thread ids"
            strace = try ChildProcess(
                executable, ["-c", "-f", "-o", output, "-p", threads.map(String.init).joined(separator: ",")])
            coverage = try await waitUntilTraced(pid, by: strace)
            guard coverage.traced == coverage.threads else {
                try await finish(strace)
                throw BenchError(
                    "strace traced \(coverage.traced) of \(coverage.threads) threads of \(pid):\n\(strace.log())")
            }
        }
        let start = Date()
        let result = try await body()
        let seconds = Date().timeIntervalSince(start)
        try await finish(strace)
        let summary = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        let byName = parse(summary)
        guard !byName.isEmpty else { throw BenchError("no strace summary for \(pid):\n\(strace.log())\n\(summary)") }
        let counts = SyscallCounts(
            byName: byName, threads: coverage.threads, traced: coverage.traced, attachment: attachment, seconds: seconds
        )
        return (counts, result)
    }

    /// Waits (up to 10 s) until every thread of `pid` is traced by `strace`; returns how many of
    /// how many were at the end.
    static func waitUntilTraced(_ pid: Int32, by strace: ChildProcess) async throws -> (threads: Int, traced: Int) {
        let deadline = Date().addingTimeInterval(10)
        while true {
            let threads = ProcessThreads.ids(pid)
            let traced = threads.filter { ProcessThreads.tracer(pid, thread: $0) == strace.pid }.count
            if !threads.isEmpty, traced == threads.count { return (threads.count, traced) }
            if !strace.isRunning {
                throw BenchError("strace exited (status \(strace.terminationStatus)):\n\(strace.log())")
            }
            if Date() > deadline { return (threads.count, traced) }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// SIGINT, as strace(1) says to end a trace: strace detaches and writes its summary.
    static func finish(_ strace: ChildProcess) async throws {
        strace.signal(SIGINT)
        let deadline = Date().addingTimeInterval(30)
        while strace.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        if strace.isRunning {
            strace.stop()
            throw BenchError("strace did not end within 30 s of SIGINT:\n\(strace.log())")
        }
    }

    /// The rows of strace's `-c` table: `% time, seconds, usecs/call, calls, [errors,] syscall`;
    /// the header, the rules and the `total` row are skipped.
    static func parse(_ summary: String) -> [String: Int] {
        var calls: [String: Int] = [:]
        for line in summary.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 5, Double(fields[0]) != nil, let count = Int(fields[3]), let name = fields.last,
                name != "total"
            else { continue }
            calls[String(name), default: 0] += count
        }
        return calls
    }
}
