import Foundation
import Subprocess

/// What a browser with gattway's page open does to the gateway, for the cost of the page
/// (BENCHMARKS.md, "The web page's cost"): the page's event stream (`/api/events`, read as it
/// comes), the view's refresh — the device list every 10 s (`/api/page/devices`, the page's
/// first view), or the radio every 2 s (`/api/page/radio`, which also makes the core's radio
/// view listen) — and Prometheus scraping `/metrics` every 5 s. Each request is a curl run by
/// this process, so only the server's side is the gateway's CPU.
final class WebPageClient: @unchecked Sendable {
    static let token = "bench-web-token-0123456789abcdef"
    /// The `web` section of config.json that the gateway under measurement gets.
    static func config(port: UInt16) -> String {
        #"{"listen": "127.0.0.1:\#(port)", "auth": {"token": "\#(token)"}}"#
    }

    /// The page's views, as the bench names them.
    enum View: String, CaseIterable {
        case devices, radio
    }

    let port: UInt16
    let view: View
    private let lock = NSLock()
    private var stream: Process?
    private var polling: Task<Void, Never>?
    private var requests = 0
    private var failures = 0

    init(port: UInt16, view: View = .devices) {
        self.port = port
        self.view = view
    }

    /// Opens the event stream and starts the polls.
    func start() throws {
        let stream = Process()
        stream.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        stream.arguments = [
            "-sN", "-o", "/dev/null", "-H", "Authorization: Bearer \(Self.token)",
            "http://127.0.0.1:\(port)/api/events",
        ]
        stream.standardOutput = FileHandle.nullDevice
        stream.standardError = FileHandle.nullDevice
        try stream.run()
        lock.withLock { self.stream = stream }
        let port = self.port
        let view = self.view
        polling = Task { [weak self] in
            var tick = 0
            while !Task.isCancelled {
                // The view as page.js refreshes it, /metrics every 5 s (ticks of 1 s).
                switch view {
                case .devices: if tick % 10 == 0 { self?.get("/api/page/devices", port: port) }
                case .radio: if tick % 2 == 0 { self?.get("/api/page/radio", port: port) }
                }
                if tick % 5 == 0 { self?.get("/metrics", port: port) }
                tick += 1
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// One request, waited for: whether it was answered 200.
    func visit(_ path: String) -> Bool {
        let failed = lock.withLock { failures }
        get(path, port: port)
        return lock.withLock { failures } == failed
    }

    private func get(_ path: String, port: UInt16) {
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = [
            "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "-H",
            "Authorization: Bearer \(Self.token)", "http://127.0.0.1:\(port)\(path)",
        ]
        let output = Pipe()
        curl.standardOutput = output
        curl.standardError = FileHandle.nullDevice
        do {
            try curl.run()
            curl.waitUntilExit()
            let status = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            lock.withLock {
                requests += 1
                if status != "200" { failures += 1 }
            }
        } catch {
            lock.withLock { failures += 1 }
        }
    }

    /// Ends the stream and the polls; returns the requests made, those not answered 200, and
    /// whether the event stream was still open (the server kept it), or curl's exit status.
    func stop() -> (requests: Int, failures: Int, stream: String) {
        polling?.cancel()
        let state = lock.withLock {
            guard let stream else { return "never opened" }
            let state = stream.isRunning ? "open to the end" : "ENDED (curl \(stream.terminationStatus))"
            stream.terminate()
            self.stream = nil
            return state
        }
        return lock.withLock { (requests, failures, state) }
    }
}
