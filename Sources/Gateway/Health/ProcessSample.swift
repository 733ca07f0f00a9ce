import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Resource use of this process, read from `/proc/self` (Linux).
public struct ProcessSample: Sendable, Equatable {
    /// Resident set size in bytes (`VmRSS` of `/proc/self/status`).
    public var residentBytes: Int
    /// User + system CPU time in seconds (`utime` + `stime` of `/proc/self/stat`).
    public var cpuSeconds: Double

    public init(residentBytes: Int, cpuSeconds: Double) {
        self.residentBytes = residentBytes
        self.cpuSeconds = cpuSeconds
    }

    /// The current sample; nil where `/proc` is not available.
    public static func current() -> ProcessSample? {
        guard let status = LocalFile.readText("/proc/self/status"),
            let stat = LocalFile.readText("/proc/self/stat")
        else { return nil }
        return parse(status: status, stat: stat, ticksPerSecond: Double(sysconf(Int32(_SC_CLK_TCK))))
    }

    /// Parses the two files' text: `VmRSS:  1234 kB` and fields 14/15 of `stat` (counted after
    /// the `)` that ends the command name, which may itself contain spaces and parentheses).
    public static func parse(status: String, stat: String, ticksPerSecond: Double) -> ProcessSample? {
        var resident: Int?
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if fields.count >= 2, let kilobytes = Int(fields[1]) { resident = kilobytes * 1024 }
        }
        guard let resident, let close = stat.lastIndex(of: ")") else { return nil }
        // After ")": state(3) ppid(4) … utime(14) stime(15) → indices 11 and 12 from field 3.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]), ticksPerSecond > 0
        else { return nil }
        return ProcessSample(residentBytes: resident, cpuSeconds: (user + system) / ticksPerSecond)
    }
}
