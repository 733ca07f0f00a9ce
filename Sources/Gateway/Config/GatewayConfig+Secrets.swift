import FoundationEssentials

extension GatewayConfig {
    /// Text that must never appear in a log line: the MQTT password (also when written into
    /// the server URL as `user:password@`) and every bind key (as written, lower and upper
    /// case hex). ``Gateway`` redacts these from everything it logs; a composition root that
    /// logs on its own should use ``GatewayLogger/redacting(_:)`` with them.
    public var secrets: [String] {
        var secrets: [String] = []
        if let password = mqtt.password { secrets.append(password) }
        if let at = mqtt.server.lastIndex(of: "@"), let scheme = mqtt.server.firstRange(of: "://") {
            let userInfo = mqtt.server[scheme.upperBound..<at]
            if let colon = userInfo.firstIndex(of: ":") { secrets.append(String(userInfo[userInfo.index(after: colon)...])) }
        }
        let digits = Array("0123456789abcdef")
        for rule in devices {
            guard let key = rule.bindKey else { continue }
            let hex = String(key.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] })
            secrets += [hex, hex.uppercased()]
        }
        return secrets
    }
}
