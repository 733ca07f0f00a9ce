import EventLoop
import Foundation
import HTTPServer
import Synchronization
import TestSupport
import Testing

/// The server on a real loop against curl: routes, limits, event streams.
@Suite("HTTPServer on the loop")
struct HTTPServerLoopTests {
    /// A server with one stream route, kept for the test to push into.
    final class Fixture: @unchecked Sendable {
        let loop = EventLoop(name: "http-test")
        var server: HTTPServer?
        var streams: [EventStream] = []
        /// The deferred replies of `/later?timeout=<s>` (not answered by the route).
        var deferred: [DeferredReply] = []
        /// How many were abandoned (the server answered 504 or 503 in the route's place).
        var abandoned = 0
        /// What the server refused itself.
        var refusals: [HTTPServer.Refusal] = []

        func start(_ configure: (inout HTTPServerConfiguration) -> Void = { _ in }) async throws -> UInt16 {
            var configuration = HTTPServerConfiguration()
            configuration.port = 0
            configure(&configuration)
            let configured = configuration
            return try await loop.submit { [self] in
                let server = try HTTPServer.start(
                    configured, loop: loop,
                    handlers: HTTPHandlers(
                        screen: { _ in nil },
                        respond: { [self] request in
                            if request.path == "/events" {
                                let stream = EventStream(limit: 4096)
                                stream.send(event: "hello", data: "1")
                                streams.append(stream)
                                return .events(stream)
                            }
                            if request.path == "/later" {
                                let reply = DeferredReply(timeout: Double(request.queryValue("timeout") ?? "") ?? 30)
                                reply.onAbandon = { [self] in abandoned += 1 }
                                deferred.append(reply)
                                return .deferred(reply)
                            }
                            return .response(.text(200, "ok \(request.method) \(request.path) \(request.body.count)"))
                        }, refused: { [self] in refusals.append($0) }))
                self.server = server
                return server.port
            }
        }

        /// Waits (at most 20 s) until `count` event streams began: a push before that reaches nobody.
        func waitForStreams(_ count: Int) async throws {
            let deadline = ContinuousClock.now + .seconds(20)
            while try await loop.submit({ [self] in streams.count }) < count {
                guard ContinuousClock.now < deadline else { throw CancellationError() }
                try await Task.sleep(for: .milliseconds(20))
            }
        }

        func push(_ data: String) async throws {
            try await loop.submit { [self] in for stream in streams { stream.send(event: "tick", data: data) } }
        }

        func stop() async throws {
            try await loop.submit { [self] in server?.stop() }
            loop.shutdown()
        }
    }

    static func curl(_ arguments: [String]) async throws -> String {
        try await ChildProcess.run("/usr/bin/curl", ["-s", "-w", "\n%{http_code}"] + arguments).output
    }

    /// GET /x again (for at most 20 s) until the answer ends with `suffix`; the last answer.
    static func curlUntil(_ suffix: String, _ port: UInt16) async throws -> String {
        let deadline = ContinuousClock.now + .seconds(20)
        var answer = ""
        repeat {
            answer = try await curl(["--max-time", "2", "http://127.0.0.1:\(port)/x"])
            if answer.hasSuffix(suffix) { break }
            try await Task.sleep(for: .milliseconds(100))
        } while ContinuousClock.now < deadline
        return answer
    }

    @Test("a plain request is answered")
    func plain() async throws {
        let fixture = Fixture()
        let port = try await fixture.start()
        let answer = try await Self.curl(["http://127.0.0.1:\(port)/x?a=1"])
        #expect(answer == "ok GET /x 0\n\n200", "\(answer)")
        try await fixture.stop()
    }

    @Test("events pushed after the stream began reach the client")
    func events() async throws {
        let fixture = Fixture()
        let port = try await fixture.start()
        let reading = Task { try await Self.curl(["-N", "--max-time", "6", "http://127.0.0.1:\(port)/events"]) }
        // The stream must have begun (curl may start late on a loaded machine), then both events
        // are pushed while it is open: curl ends at its --max-time with everything it read.
        try await fixture.waitForStreams(1)
        try await fixture.push("a")
        try await fixture.push("b")
        let answer = try await reading.value
        #expect(
            answer.contains("event: hello\ndata: 1\n\nevent: tick\ndata: a\n\nevent: tick\ndata: b\n\n"), "\(answer)")
        try await fixture.stop()
    }
}

extension HTTPServerLoopTests {
    @Test("a connection beyond maxConnections is closed; once one ends the next is served")
    func connectionLimit() async throws {
        let fixture = Fixture()
        let port = try await fixture.start { $0.maxConnections = 2 }
        let first = try TCPClient.connect(port)
        let second = try TCPClient.connect(port)
        // The loop accepts the two in its next turns (late on a loaded machine): a third is
        // served until then, refused once both are held; and served again once one has ended.
        let refused = try await Self.curlUntil("\n000", port)
        #expect(refused.hasSuffix("\n000"), "\(refused)")
        close(first)
        let served = try await Self.curlUntil("\n200", port)
        #expect(served.hasSuffix("\n200"), "\(served)")
        close(second)
        // Each connection closed at the limit was counted (none before it).
        let refusals = try await fixture.loop.submit { fixture.refusals }
        #expect(!refusals.isEmpty && refusals.allSatisfy { $0 == .connectionLimit }, "\(refusals)")
        try await fixture.stop()
    }
}

extension HTTPServerLoopTests {
    @Test("a client that does not read is dropped once it is the stream's limit behind; the connection is closed")
    func slowClientDropped() async throws {
        let fixture = Fixture()
        let port = try await fixture.start()
        let slow = try TCPClient.connect(port, receiveBuffer: 1024)
        defer { close(slow) }
        TCPClient.send(slow, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        try await fixture.waitForStreams(1)
        let line = String(repeating: "x", count: 1000)
        var dropped = false
        for _ in 0..<400 where !dropped {
            try await fixture.push(line)
            try await Task.sleep(for: .milliseconds(2))
            dropped = try await fixture.loop.submit { fixture.streams.first?.wasDropped ?? false }
        }
        #expect(dropped)
        let (open, buffered, count) = try await fixture.loop.submit {
            (fixture.streams[0].isOpen, fixture.streams[0].bufferedBytes, fixture.server?.eventStreamCount ?? -1)
        }
        #expect(!open && buffered == 0)
        // The connection ends: reading it reaches end of file (after what was sent before).
        var buffer = [UInt8](repeating: 0, count: 65536)
        var total = 0
        while true {
            let got = recv(slow, &buffer, buffer.count, 0)
            if got <= 0 { break }
            total += got
        }
        #expect(total > 0)
        let after = try await fixture.loop.submit { fixture.server?.eventStreamCount ?? -1 }
        #expect(after == 0, "streams still served: \(after) (was \(count))")
        try await fixture.stop()
    }
}

extension HTTPServerLoopTests {
    @Test("a deferred reply: the connection waits until the handler answers; unanswered, 504 at its timeout")
    func deferredReply() async throws {
        let fixture = Fixture()
        let port = try await fixture.start()
        let waiting = Task { try await Self.curl(["--max-time", "20", "http://127.0.0.1:\(port)/later"]) }
        // Answered by the handler later (a command's response after its GATT write).
        let deadline = ContinuousClock.now + .seconds(20)
        while try await fixture.loop.submit({ fixture.deferred.count }) < 1, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await fixture.loop.submit { fixture.server?.waitingCount } == 1)
        try await fixture.loop.submit { fixture.deferred[0].answer(.text(200, "later")) }
        let answer = try await waiting.value
        #expect(answer == "later\n\n200", "\(answer)")
        // Never answered: 504 once its timeout passed, the handler told it was abandoned.
        let started = ContinuousClock.now
        let timedOut = try await Self.curl(["--max-time", "20", "http://127.0.0.1:\(port)/later?timeout=1"])
        #expect(timedOut.hasSuffix("\n504"), "\(timedOut)")
        #expect(ContinuousClock.now - started >= .milliseconds(900))
        #expect(try await fixture.loop.submit { (fixture.abandoned, fixture.server?.waitingCount) } == (1, 0))
        // A late answer after the timeout changes nothing; the server serves on.
        try await fixture.loop.submit { fixture.deferred[1].answer(.text(200, "too late")) }
        let plain = try await Self.curl(["http://127.0.0.1:\(port)/x"])
        #expect(plain.hasSuffix("\n200"), "\(plain)")
        // At the stop a waiting request is answered 503.
        let atStop = Task { try await Self.curl(["--max-time", "20", "http://127.0.0.1:\(port)/later"]) }
        while try await fixture.loop.submit({ fixture.deferred.count }) < 3,
            ContinuousClock.now < deadline + .seconds(20)
        {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .milliseconds(300))
        try await fixture.stop()
        let stopped = try await atStop.value
        #expect(stopped.hasSuffix("\n503"), "\(stopped)")
    }
}
