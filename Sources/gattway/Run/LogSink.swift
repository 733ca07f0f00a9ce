import Foundation
import Gateway

/// Log lines on stderr with syslog priority prefixes (`<3>` error … `<7>` debug), which journald
/// turns into priorities; lines below the configured level are dropped before formatting.
struct LogSink: Sendable {
    let threshold: GatewayLogger.Level

    /// `--log-level` names: error, warning, notice, info, debug.
    static func level(named name: String) -> GatewayLogger.Level? {
        switch name.lowercased() {
        case "error", "err": .error
        case "warning", "warn": .warning
        case "notice": .notice
        case "info": .info
        case "debug": .debug
        default: nil
        }
    }

    func callAsFunction(_ level: GatewayLogger.Level, _ message: @autoclosure () -> String) {
        guard level <= threshold else { return }
        var text = "<\(level.rawValue)>" + message()
        text = text.replacingOccurrences(of: "\n", with: " ")
        standardError(text + "\n")
    }

    var gatewayLogger: GatewayLogger {
        let sink = self
        return GatewayLogger { level, message in sink(level, message) }
    }
}
