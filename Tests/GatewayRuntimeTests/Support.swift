import Foundation
import Gateway
import GatewayRuntime
import Synchronization

/// What the services and the group did, in order, for assertions.
final class Journal: Sendable {
    private let entries = Mutex<[(at: Double, text: String)]>([])
    private let began = Date()

    func note(_ text: String) {
        let at = Date().timeIntervalSince(began)
        entries.withLock { $0.append((at, text)) }
    }

    var all: [String] { entries.withLock { $0.map(\.text) } }

    /// Seconds from the journal's making to the first entry that is `text`.
    func time(of text: String) -> Double? { entries.withLock { $0.first { $0.text == text }?.at } }

    func index(of text: String) -> Int? { all.firstIndex(of: text) }

    /// A logger whose lines go into the journal as `<level> text`.
    var logger: GatewayLogger {
        GatewayLogger(minimum: .debug) { [self] level, line in note("<\(level.rawValue)>\(line)") }
    }

    var logLines: [String] { all.filter { $0.hasPrefix("<") } }
}

/// A service that notes each step of its life in the journal; what each step does is set per test.
final class FakeService: Service {
    let name: String
    let journal: Journal
    let startError: (any Error)?
    let runError: (any Error)?
    /// The start waits until cancelled (the termination signal during the start).
    let startWaits: Bool
    /// The stop takes this long and ignores cancellation.
    let stubbornStop: Double?

    init(
        _ name: String, _ journal: Journal, startError: (any Error)? = nil, runError: (any Error)? = nil,
        startWaits: Bool = false, stubbornStop: Double? = nil
    ) {
        self.name = name
        self.journal = journal
        self.startError = startError
        self.runError = runError
        self.startWaits = startWaits
        self.stubbornStop = stubbornStop
    }

    func start() async throws {
        journal.note("start \(name)")
        if startWaits {
            try await Task.sleep(for: .seconds(60))
        }
        if let startError { throw startError }
    }

    func run() async throws {
        journal.note("run \(name)")
        if let runError {
            try await Task.sleep(for: .milliseconds(50))
            throw runError
        }
        // Until cancelled.
        try? await Task.sleep(for: .seconds(600))
        journal.note("run \(name) ended")
    }

    func stop(within deadline: StopDeadline) async -> String? {
        journal.note("stop \(name)")
        if let stubbornStop {
            // An unstructured task is not cancelled with the caller: this stop ignores cancellation.
            await Task.detached { try? await Task.sleep(for: .seconds(stubbornStop)) }.value
            journal.note("stop \(name) ended")
        }
        return nil
    }
}

struct Failed: Error, CustomStringConvertible {
    var description: String { "it failed" }
}
