extension GatewayConfig {
    /// What `gattway config check` says of a valid configuration (and the web page of the running
    /// one): `5 device rules, 1 declarative parser, 2 commands, base topic gattway, broker …` (with a
    /// `presence` section, `…, 2 commands, 3 presence identities, base topic …`).
    public var summary: String {
        let commands = devices.reduce(0) { $0 + $1.commands.count }
        func count(_ number: Int, _ noun: String) -> String { "\(number) \(noun)\(number == 1 ? "" : "s")" }
        // Presence identities are counted, never shown (an IRK is a secret).
        let presence =
            presence.map { ", \($0.identities.count) presence identit\($0.identities.count == 1 ? "y" : "ies")" } ?? ""
        return count(devices.count, "device rule") + ", " + count(parsers.count, "declarative parser") + ", "
            + count(commands, "command") + presence + ", base topic \(mqtt.baseTopic), broker \(mqtt.server)"
    }
}
