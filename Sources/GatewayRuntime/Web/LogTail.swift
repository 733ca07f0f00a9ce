import FIFOQueue
import Gateway
import JSON
import LocalSystem
import Synchronization

/// The last lines of `gattway run`'s log, for the web page's log view (docs/web-page.md): what
/// went to the log after the configuration's secrets were removed, at the log's level. Bounded:
/// ``maxLines`` lines of at most ``maxLineBytes`` bytes each (a longer one is cut, marked `…`).
/// Written from any thread (the loop's, the start's and stop's tasks), read by the web server.
public final class LogTail: Sendable {
    public static let maxLines = 200
    public static let maxLineBytes = 1000

    private struct Line {
        var milliseconds: Int64
        var level: GatewayLogger.Level
        var text: String
    }

    private let lines = Mutex(FIFO<Line>())

    public init() {}

    /// `log` (of level `minimum`), whose every line is kept here too.
    public func keeping(_ log: GatewayLogger, minimum: GatewayLogger.Level) -> GatewayLogger {
        GatewayLogger(minimum: minimum) { [self] level, message in
            log(level, message)
            append(level, message)
        }
    }

    func append(_ level: GatewayLogger.Level, _ message: String) {
        var text = message
        if text.utf8.count > Self.maxLineBytes {
            text = String(decoding: text.utf8.prefix(Self.maxLineBytes), as: UTF8.self) + "…"
        }
        let line = Line(milliseconds: WallClock.milliseconds(), level: level, text: text)
        lines.withLock { lines in
            if lines.count >= Self.maxLines { lines.removeFirst() }
            lines.append(line)
        }
    }

    /// The lines, oldest first: `[{"time": ms since 1970, "level": "notice", "text": …}, …]`.
    public var json: JSONValue {
        let kept = lines.withLock { Array($0) }
        return .array(
            kept.map { line in
                .object([
                    ("time", .number(Double(line.milliseconds))), ("level", .string("\(line.level)")),
                    ("text", .string(line.text)),
                ])
            })
    }
}
