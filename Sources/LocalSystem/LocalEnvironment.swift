#if canImport(Glibc)
    import Glibc
#endif

/// The process environment, read from `environ`.
public enum LocalEnvironment {
    public static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// Every variable, as a dictionary (the first of duplicate names wins, as getenv does).
    public static var all: [String: String] {
        var result: [String: String] = [:]
        var cursor = environ
        while let entry = cursor.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                let name = String(text[..<equals])
                if result[name] == nil { result[name] = String(text[text.index(after: equals)...]) }
            }
            cursor += 1
        }
        return result
    }
}

/// Wall-clock time (CLOCK_REALTIME), for timestamps; durations use `ContinuousClock`.
public enum WallClock {
    /// Seconds since 1970-01-01 UTC.
    public static func seconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// Milliseconds since 1970-01-01 UTC, rounded down.
    public static func milliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// The local time zone's offset from UTC in seconds at `seconds` since 1970 (east positive),
    /// as `localtime_r` sees it: the TZ variable, else /etc/localtime. 0 when the time cannot be
    /// converted.
    public static func utcOffsetSeconds(at seconds: Int64) -> Int {
        var time = time_t(truncatingIfNeeded: seconds)
        var parts = tm()
        guard localtime_r(&time, &parts) != nil else { return 0 }
        return Int(parts.tm_gmtoff)
    }
}
