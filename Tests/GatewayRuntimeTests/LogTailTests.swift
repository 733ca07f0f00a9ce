import Gateway
import JSON
import Synchronization
import Testing

@testable import GatewayRuntime

@Suite("The last log lines the web page shows")
struct LogTailTests {
    @Test("lines past the log's level are not kept; at most 200 lines, each cut at 1,000 bytes; secrets redacted first")
    func bounds() {
        let tail = LogTail()
        let written = Mutex([String]())
        let log = tail.keeping(GatewayLogger { _, line in written.withLock { $0.append(line) } }, minimum: .notice)
            .redacting(["s3cr3t-token"])
        log(.debug, "not kept")
        log(.notice, "the token s3cr3t-token")
        log(.warning, String(repeating: "x", count: 5000))
        guard case .array(let lines) = tail.json else {
            Issue.record("not an array")
            return
        }
        #expect(lines.count == 2)
        #expect(lines.first?["text"] == .string("the token ***"))
        #expect(lines.first?["level"] == .string("notice"))
        if case .string(let long)? = lines.last?["text"] { #expect(long.utf8.count <= LogTail.maxLineBytes + 3) }
        #expect(written.withLock { $0.count } == 2)
        for index in 0..<300 { log(.notice, "line \(index)") }
        guard case .array(let kept) = tail.json else { return }
        #expect(kept.count == LogTail.maxLines)
        #expect(kept.last?["text"] == .string("line 299"))
        #expect(kept.first?["text"] == .string("line 100"))
    }
}
