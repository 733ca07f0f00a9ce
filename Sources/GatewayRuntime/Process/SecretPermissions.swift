import Gateway

#if canImport(Glibc)
    import Glibc
#endif

/// Files holding the gateway's secrets that every user of the machine may read: config.json
/// when it holds a password, bind key or presence IRK itself, `mqtt.password_file` and the TLS client key.
/// `gattway run` warns about each at start; `gattway doctor` reports each as a warning.
public enum SecretPermissions {
    public struct Exposure: Equatable, Sendable {
        public let path: String
        /// What the file holds, for the message.
        public let holds: String
    }

    public static func worldReadable(configPath: String, _ config: GatewayConfig) -> [Exposure] {
        var files: [(path: String, holds: String)] = []
        if config.holdsSecrets { files.append((configPath, "a password or key")) }
        files += config.secretFiles
        return files.filter { isWorldReadable($0.path) }.map { Exposure(path: $0.path, holds: $0.holds) }
    }

    /// The file's mode lets "others" read it (symbolic links followed).
    public static func isWorldReadable(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & 0o004 != 0
    }
}
