#if canImport(Glibc)
import Glibc
#endif

/// Unmaps the executable's code pages from this process (`madvise(MADV_DONTNEED)` on the
/// executable's `r-xp` mapping) so that only the code used from then on is mapped again.
///
/// Measured idle `gattway run` (BENCHMARKS.md, "Resident memory"): the static binary's code
/// mapping holds ~7 MB resident after startup, but only ~1.9 MB of it is accessed while idle
/// (`/proc/PID/clear_refs` + `Referenced`). The rest is code that ran once — the CLI, config
/// loading, connecting — plus the kernel's 64 KB fault-around of pages already in the page cache,
/// which maps 16 pages for every one touched. Dropping the mapping's pages takes idle RSS from
/// 16.2 to 12.9 MB. The pages stay in the page cache, so the code still in use comes back with
/// minor faults (about a hundred, microseconds each).
///
/// Only unmodified file pages are dropped: the mapping is skipped when it holds private copies of
/// pages (`Anonymous` in smaps, e.g. a debugger's breakpoints), which `MADV_DONTNEED` would discard.
enum ExecutableCodePages {
    /// Drops the code pages; false when the mapping was not found or not safe to drop.
    @discardableResult
    static func release() -> Bool {
        #if canImport(Glibc)
        guard let (start, end) = cleanCodeMapping() else { return false }
        guard let address = UnsafeMutableRawPointer(bitPattern: start) else { return false }
        return madvise(address, Int(end - start), MADV_DONTNEED) == 0
        #else
        return false
        #endif
    }

    /// The address range of the executable's `r-xp` mapping when its `Anonymous` is 0.
    static func cleanCodeMapping() -> (start: UInt, end: UInt)? {
        guard let exe = resolvedExecutablePath(), let smaps = readFile("/proc/self/smaps") else { return nil }
        var range: (UInt, UInt)?
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), fields.count >= 5, !first.hasSuffix(":") {
                if range != nil { return nil }  // the mapping ended without an Anonymous line
                guard fields.count == 6, fields[1] == "r-xp", fields[5] == exe else { continue }
                let bounds = first.split(separator: "-")
                guard bounds.count == 2, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16) else { return nil }
                range = (start, end)
            } else if let found = range, fields.first == "Anonymous:" {
                return fields.count >= 2 && fields[1] == "0" ? found : nil
            }
        }
        return nil
    }

    private static func resolvedExecutablePath() -> Substring? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return Substring(String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    private static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(fd, &chunk, chunk.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
