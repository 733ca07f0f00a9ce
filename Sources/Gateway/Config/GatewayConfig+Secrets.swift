import Bluetooth
import LocalSystem

extension GatewayConfig {
    /// Text that must never appear in a log line: the MQTT password (also when written into
    /// the server URL as `user:password@`) and every bind key (as written, lower and upper
    /// case hex) and every IRK of `presence.identities` (likewise). ``Gateway`` redacts these from everything it logs; a composition root that
    /// logs on its own should use ``GatewayLogger/redacting(_:)`` with them.
    public var secrets: [String] {
        var secrets: [String] = []
        if let password = mqtt.password { secrets.append(password) }
        if let password = serverPassword { secrets.append(password) }
        if let key = bluetoothProxy.encryptionKeyText { secrets.append(key) }
        if let token = web.token { secrets.append(token) }
        secrets += web.users.map(\.password)
        for rule in devices {
            guard let key = rule.bindKey else { continue }
            secrets += [Hex.encode(key), Hex.encode(key, uppercase: true)]
        }
        for irk in presenceIRKs { secrets += [Hex.encode(irk), Hex.encode(irk, uppercase: true)] }
        return secrets
    }

    /// Whether config.json itself holds a secret: a password written in it (not read from
    /// `password_file`), a password in the server URL, a bind key or an IRK.
    public var holdsSecrets: Bool {
        (mqtt.password != nil && mqtt.passwordFile == nil) || serverPassword != nil
            || devices.contains { $0.bindKey != nil } || bluetoothProxy.encryptionKeyText != nil
            || (web.token != nil && web.tokenFile == nil) || !presenceIRKs.isEmpty
    }

    /// The IRKs of `presence.identities`.
    private var presenceIRKs: [[UInt8]] {
        (presence?.identities ?? []).compactMap { identity in
            if case .irk(let irk) = identity.key { return irk }
            return nil
        }
    }

    /// The other files the config names that hold secrets: `mqtt.password_file` and the TLS
    /// client key (`mqtt.tls.key_file`).
    public var secretFiles: [(path: String, holds: String)] {
        var files: [(path: String, holds: String)] = []
        if let file = mqtt.passwordFile { files.append((file, "the MQTT password (mqtt.password_file)")) }
        if let key = mqtt.tls?.keyFile { files.append((key, "the TLS client key (mqtt.tls.key_file)")) }
        if let file = web.tokenFile { files.append((file, "the web server's token (web.auth.token_file)")) }
        if let file = web.usersFile { files.append((file, "the web server's passwords (web.auth.users_file)")) }
        if let key = web.tls?.keyFile { files.append((key, "the web server's TLS key (web.tls.key_file)")) }
        return files
    }

    /// The password in `mqtt://user:password@host`, if the server URL has one.
    private var serverPassword: String? {
        guard let at = mqtt.server.lastIndex(of: "@"), let scheme = mqtt.server.firstRange(of: "://") else {
            return nil
        }
        let userInfo = mqtt.server[scheme.upperBound..<at]
        return userInfo.firstIndex(of: ":").map { String(userInfo[userInfo.index(after: $0)...]) }
    }
}
