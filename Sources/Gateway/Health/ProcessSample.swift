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
        // As bytes: `/metrics` reads it at every scrape.
        let text = Array(status.utf8)
        let key = Array("VmRSS:".utf8)
        var resident: Int?
        var start = 0
        while start < text.count {
            let end = text[start...].firstIndex(of: 0x0A) ?? text.count
            if end - start >= key.count, text[start..<(start + key.count)].elementsEqual(key) {
                let fields = text[start..<end].split(whereSeparator: { $0 == 0x20 || $0 == 0x09 })
                if fields.count >= 2, let kilobytes = Int(String(decoding: fields[1], as: UTF8.self)) {
                    resident = kilobytes * 1024
                }
            }
            start = end + 1
        }
        let statBytes = Array(stat.utf8)
        guard let resident, let close = statBytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // After ")": state(3) ppid(4) … utime(14) stime(15) → indices 11 and 12 from field 3.
        let fields = statBytes[(close + 1)...].split(separator: 0x20)
        guard fields.count > 12, let user = Double(String(decoding: fields[11], as: UTF8.self)),
            let system = Double(String(decoding: fields[12], as: UTF8.self)), ticksPerSecond > 0
        else { return nil }
        return ProcessSample(residentBytes: resident, cpuSeconds: (user + system) / ticksPerSecond)
    }
}
