import Gateway
import GatewayRuntime
import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The checks that look at files: the configuration (present, readable, valid, secrets not
/// world-readable) and the state directory (writable by whoever runs the gateway, not on a
/// read-only file system, with room for the store-and-forward queue file).
enum FileDiagnosis {
    /// Loads the configuration; returns it (nil when invalid) and its checks.
    static func config(path: String) -> (GatewayConfig?, [DoctorCheck]) {
        if !LocalFile.exists(path) {
            var check = DoctorCheck.fail(
                "config", "\(path) does not exist",
                "pass --config FILE, or install one: sudo deploy/install.sh (docs/config.md has every key)")
            check.configProblem = true
            return (nil, [check])
        }
        if access(path, R_OK) != 0 {
            var check = DoctorCheck.fail(
                "config", "\(path) is not readable by \(userName)",
                "run doctor as the service's user: sudo -u gattway gattway doctor --config \(path)")
            check.configProblem = true
            return (nil, [check])
        }
        let config: GatewayConfig
        do {
            config = try GatewayConfig.load(path: path)
        } catch {
            let checks = error.lines.map { line in
                var check = DoctorCheck.fail("config", "\(path): \(line)")
                check.configProblem = true
                return check
            }
            var all = checks
            if var last = all.popLast() {
                last.fix = "fix the file (docs/config.md), then: gattway config check \(path)"
                all.append(last)
            }
            return (nil, all)
        }
        let rules = config.devices.count
        var checks = [
            DoctorCheck.ok(
                "config",
                "\(path) is valid (\(rules) device rule\(rules == 1 ? "" : "s"), broker \(config.mqtt.server), "
                    + "base topic \(config.mqtt.baseTopic))")
        ]
        for exposure in SecretPermissions.worldReadable(configPath: path, config) {
            checks.append(
                .warn(
                    "config", "\(exposure.path) is world-readable and holds \(exposure.holds)",
                    "chmod o-r \(exposure.path)"
                        + (exposure.path == path ? " (install.sh installs it 0640 root:gattway)" : "")))
        }
        return (config, checks)
    }

    /// A warning for each file of secrets set at run time in the state directory (the bind keys,
    /// `bindkeys.json`; the presence identities, `identities.json`) that others than its owner
    /// may read (the gateway writes them 0600).
    static func runtimeSecrets(in directory: String?) -> [DoctorCheck] {
        guard let directory else { return [] }
        let files = [(Gateway.bindKeysFileName, "bind keys"), (Presence.fileName, "presence identities (IRKs)")]
        return files.compactMap { name, holds in
            let path = directory + "/" + name
            guard let permissions = LocalFile.permissions(path), permissions.mode & 0o077 != 0 else { return nil }
            return .warn(
                "state",
                "\(path) is readable by others (mode \(String(permissions.mode, radix: 8))) and holds \(holds)",
                "chmod 600 \(path)")
        }
    }

    /// Whether the gateway could keep its state in `directory` (created if missing, as `gattway
    /// run` does): a writable directory on a read-write file system (fail otherwise) with at
    /// least ``freeSpaceNeeded(_:)`` free (warn below).
    static func stateDirectory(_ directory: String?, fromOption: Bool, storeAndForward: StoreAndForwardSettings)
        -> DoctorCheck
    {
        guard let directory else {
            return .ok(
                "state",
                "no state directory (the offline queue and known devices live in memory only; "
                    + "the systemd unit passes --state-dir /var/lib/gattway)")
        }
        let source = fromOption ? "--state-dir" : "state_directory"
        var info = stat()
        if stat(directory, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFDIR else {
                return .fail("state", "\(directory) (\(source)) is not a directory", "point \(source) at a directory")
            }
            var space = statvfs()
            let measured = statvfs(directory, &space) == 0
            let readOnlyFix =
                "remount it read-write (mount -o remount,rw \(mountPoint(of: directory)); after I/O errors check the disk first), "
                + "or point \(source) at a writable file system; until then gattway run keeps its offline queue in memory only"
            if measured, space.f_flag & UInt(ST_RDONLY) != 0 {
                return .fail("state", "\(directory) (\(source)) is on a read-only file system", readOnlyFix)
            }
            let probe = canWrite(in: directory)
            switch probe {
            case 0: break
            case EROFS: return .fail("state", "\(directory) (\(source)) is on a read-only file system", readOnlyFix)
            case ENOSPC, EDQUOT:
                return .fail(
                    "state",
                    "\(directory) (\(source)) is full: no room for a new file (\(String(cString: strerror(probe))))",
                    "free space or inodes there; until then gattway run keeps its offline queue in memory only")
            default:
                return .fail(
                    "state", "\(directory) (\(source)) is not writable by \(userName)",
                    "run as the service's user (sudo -u gattway …), or: sudo chown gattway: \(directory)")
            }
            guard measured else { return .ok("state", "\(directory) is writable") }
            let free = DiskQueue.freeBytes(besides: directory + "/" + Gateway.queueFileName) ?? 0
            let needed = freeSpaceNeeded(storeAndForward)
            if free < needed {
                let reason =
                    storeAndForward.enabled
                    ? "twice store_and_forward.max_bytes: room for the queue file at its bound and the copy a compaction writes"
                    : "for the known devices"
                return .warn(
                    "state", "\(directory) has \(mebibytes(free)) free, less than \(mebibytes(needed)) (\(reason))",
                    "free space there\(storeAndForward.enabled ? " or lower store_and_forward.max_bytes" : ""); "
                        + "when it fills, gattway run keeps its offline queue in memory only")
            }
            return .ok("state", "\(directory) is writable, \(mebibytes(free)) free")
        }
        let parent =
            directory.lastIndex(of: "/").map { $0 == directory.startIndex ? "/" : String(directory[..<$0]) } ?? ""
        var parentSpace = statvfs()
        if statvfs(parent.isEmpty ? "." : parent, &parentSpace) == 0, parentSpace.f_flag & UInt(ST_RDONLY) != 0 {
            return .fail(
                "state", "\(directory) (\(source)) does not exist and its parent is on a read-only file system",
                "point \(source) at a writable file system (the systemd unit uses /var/lib/gattway)")
        }
        if access(parent.isEmpty ? "." : parent, W_OK) == 0 {
            return .ok("state", "\(directory) does not exist yet; gattway run will create it")
        }
        return .fail(
            "state", "\(directory) (\(source)) does not exist and \(userName) cannot create it",
            "sudo install -d -o gattway -g gattway -m 0750 \(directory)")
    }

    /// The free space below which the state check warns: twice `max_bytes` with store-and-forward
    /// (the queue file at its bound, plus the copy a compaction or a retry after a failure writes
    /// beside it; record headers are small beside that), at least 1 MiB; 1 MiB without (the
    /// central's known devices).
    static func freeSpaceNeeded(_ storeAndForward: StoreAndForwardSettings) -> Int {
        let floor = 1 << 20
        guard storeAndForward.enabled else { return floor }
        let (twice, overflow) = storeAndForward.maxBytes.multipliedReportingOverflow(by: 2)
        return overflow ? Int.max : max(floor, twice)
    }

    /// The mount point of the file system holding `directory`: the highest ancestor on the
    /// same device.
    static func mountPoint(of directory: String) -> String {
        var current = directory
        var info = stat()
        guard stat(current, &info) == 0 else { return directory }
        let device = info.st_dev
        while current != "/" {
            let slash = current.lastIndex(of: "/")
            let parent = slash.map { $0 == current.startIndex ? "/" : String(current[..<$0]) } ?? "."
            guard parent != ".", stat(parent, &info) == 0, info.st_dev == device else { break }
            current = parent
        }
        return current
    }

    /// "31.8 MiB".
    static func mebibytes(_ bytes: Int) -> String {
        let tenths = bytes / (1 << 20 / 10)
        return "\(tenths / 10).\(tenths % 10) MiB"
    }

    /// Creates and removes a file in `directory`: the honest test (access(2) ignores read-only
    /// mounts). 0 when it could, else the `errno` of the failed create or write (a file system
    /// out of space may still create an empty file).
    private static func canWrite(in directory: String) -> Int32 {
        let probe = directory + "/.gattway-doctor-\(getpid())"
        let fd = open(probe, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return errno }
        defer {
            close(fd)
            unlink(probe)
        }
        let byte: [UInt8] = [0]
        let written = byte.withUnsafeBytes { write(fd, $0.baseAddress, 1) }
        return written == 1 ? 0 : errno
    }

    /// The effective user's name, for messages.
    static var userName: String { AdapterAdvice.userName }
}
