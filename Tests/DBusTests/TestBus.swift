import DBus
import EventLoop
import Foundation
import Synchronization
import TestSupport

/// A private dbus-daemon plus an event loop, for one test. `run` always stops both.
struct TestBus {
    let daemon: DBusDaemon
    let loop: EventLoop

    func connect() async throws -> DBusConnection {
        try await DBusConnection.connect(to: .address(daemon.address), on: loop)
    }

    /// Runs `body` with a fresh daemon and loop, then closes what `body` opened and stops both.
    static func run(_ body: (TestBus) async throws -> Void) async throws {
        let daemon = try await DBusDaemon()
        let loop = EventLoop(name: "dbus-test")
        let bus = TestBus(daemon: daemon, loop: loop)
        do {
            try await body(bus)
        } catch {
            loop.shutdown()
            daemon.stop()
            throw error
        }
        loop.shutdown()
        daemon.stop()
    }
}

/// Why a test helper gave up.
struct TestTimeout: Error, CustomStringConvertible {
    var description: String
}

/// The next element of `iterator`, or a `TestTimeout` after `seconds`.
func next<Element: Sendable>(
    _ iterator: inout AsyncStream<Element>.Iterator, within seconds: Double = defaultWait, _ what: String = "element"
) async throws -> Element {
    let box = IteratorBox(iterator)
    defer { iterator = box.iterator }
    return try await withThrowingTaskGroup(of: Element?.self) { group in
        group.addTask { await box.next() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let element = first else {
            throw TestTimeout(description: "no \(what) within \(seconds) s")
        }
        return element
    }
}

/// Lets a child task advance a stream iterator.
/// Invariant for @unchecked Sendable: only one task uses it at a time (the helper awaits it).
final class IteratorBox<Element: Sendable>: @unchecked Sendable {
    var iterator: AsyncStream<Element>.Iterator
    init(_ iterator: AsyncStream<Element>.Iterator) { self.iterator = iterator }
    func next() async -> Element? { await iterator.next() }
}

/// A value shared between a test and handlers running on the loop thread.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
    var value: Value { withLock { $0 } }
}
