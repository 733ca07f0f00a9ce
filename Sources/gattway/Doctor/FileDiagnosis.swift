import Gateway
import LocalSystem

#if canImport(Glibc)
import Glibc
#endif

/// The checks that look at files: the configuration (present, readable, valid, secrets not
/// world-readable) and the state directory (writable by whoever runs the gateway).
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
                    "chmod o-r \(exposure.path)" + (exposure.path == path ? " (install.sh installs it 0640 root:gattway)" : "")))
        }
        return (config, checks)
    }

    /// Whether the gateway could keep its state in `directory` (created if missing, as `gattway run` does).
    static func stateDirectory(_ directory: String?, fromOption: Bool) -> DoctorCheck {
        guard let directory else {
            return .ok(
                "state", "no state directory (the offline queue and known devices live in memory only; "
                    + "the systemd unit passes --state-dir /var/lib/gattway)")
        }
        let source = fromOption ? "--state-dir" : "state_directory"
        var info = stat()
        if stat(directory, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFDIR else {
                return .fail("state", "\(directory) (\(source)) is not a directory", "point \(source) at a directory")
            }
            if canWrite(in: directory) { return .ok("state", "\(directory) is writable") }
            return .fail(
                "state", "\(directory) (\(source)) is not writable by \(userName)",
                "run as the service's user (sudo -u gattway …), or: sudo chown gattway: \(directory)")
        }
        let parent = directory.lastIndex(of: "/").map { $0 == directory.startIndex ? "/" : String(directory[..<$0]) } ?? ""
        if access(parent.isEmpty ? "." : parent, W_OK) == 0 {
            return .ok("state", "\(directory) does not exist yet; gattway run will create it")
        }
        return .fail(
            "state", "\(directory) (\(source)) does not exist and \(userName) cannot create it",
            "sudo install -d -o gattway -g gattway -m 0750 \(directory)")
    }

    /// Creates and removes a file in `directory`: the honest test (access(2) ignores read-only mounts).
    private static func canWrite(in directory: String) -> Bool {
        let probe = directory + "/.gattway-doctor-\(getpid())"
        let fd = open(probe, O_CREAT | O_EXCL | O_WRONLY, 0o600)
        guard fd >= 0 else { return false }
        close(fd)
        unlink(probe)
        return true
    }

    /// The effective user's name, for messages.
    static var userName: String {
        guard let entry = getpwuid(geteuid()) else { return "uid \(geteuid())" }
        return String(cString: entry.pointee.pw_name)
    }
}
