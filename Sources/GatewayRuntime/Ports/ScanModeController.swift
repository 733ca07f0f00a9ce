import BlueZ
import EventLoop
import Gateway
import Synchronization

/// `bluetooth.scan_mode` for the gateway's own scan (docs/config.md, "Scan modes"): the
/// ``ScanOptions/mode`` its scan starts with and, with `auto`, the active windows.
///
/// `auto` scans passively, and actively for ``window`` seconds at a time while a device rule
/// matches by a name that has not been heard yet (a name a device sends only in its scan
/// response is never heard passively): a window at the start, then one every ``interval``
/// seconds until every such name was heard. On the management path the central keeps the last
/// name each address sent, so a device heard once keeps its name in the passive reports that
/// follow. A proxy client that asks for active scans through the proxy's own scan instead
/// (``BluetoothProxy``).
///
/// Loop-thread only after ``attach(_:)``; the lock holds the little state between the start and
/// the loop.
final class ScanModeController: Sendable {
    /// Seconds of one active window.
    static let window: Double = 10
    /// Seconds from the end of one window to the next while a name is still unheard.
    static let interval: Double = 120

    let configured: BluetoothSettings.ScanModeChoice
    let loop: EventLoop
    let log: GatewayLogger

    private struct State {
        /// The gateway's scan on each adapter's central.
        var tokens: [(central: CentralManager, token: ScanToken)] = []
        /// Name patterns of device rules not matched by any name heard yet.
        var unheard: [String]
        var timer: EventLoop.Token?
        var inWindow = false
        var windows = 0
    }
    private let state: Mutex<State>

    init(config: GatewayConfig, loop: EventLoop, log: GatewayLogger) {
        configured = config.bluetooth.scanMode
        self.loop = loop
        self.log = log
        var patterns: [String] = []
        for rule in config.devices {
            if let pattern = rule.match.namePattern, !patterns.contains(pattern) { patterns.append(pattern) }
        }
        state = Mutex(State(unheard: configured == .auto ? patterns : []))
    }

    /// The mode the gateway's scan starts in.
    var initialMode: ScanMode { configured == .active ? .active : .passive }

    /// Active windows taken so far (for tests and the log).
    var windows: Int { state.withLock { $0.windows } }

    /// The gateway's scan started on `central` (once per adapter): with `auto` and a name still
    /// unheard, the first window opens (on every adapter). Loop thread.
    func attach(_ token: ScanToken, on central: CentralManager) {
        let (open, inWindow) = state.withLock { state -> (Bool, Bool) in
            state.tokens.append((central, token))
            return (!state.unheard.isEmpty, state.inWindow)
        }
        if inWindow {
            central.assumeLoopIsolated { $0.setScanMode(.active, for: token) }
        } else if open {
            openWindow()
        }
    }

    /// A report's name (after the central filled in one it knew): patterns it matches are heard.
    /// Loop thread, for every report of the gateway's scan: a quick return when nothing waits.
    func heard(_ name: String?) {
        guard let name else { return }
        let close = state.withLock { state -> Bool in
            guard !state.unheard.isEmpty else { return false }
            state.unheard.removeAll { DeviceMatch.glob($0, name) }
            return state.unheard.isEmpty && state.inWindow
        }
        if close {
            log(.info, "scan mode: every name a device rule matches was heard; passive again")
            closeWindow()
        }
    }

    /// Stops the windows (the stop).
    func stop() {
        let timer = state.withLock { state -> EventLoop.Token? in
            defer { state.timer = nil }
            state.unheard = []
            return state.timer
        }
        if let timer { loop.cancelTimer(timer) }
    }

    private func openWindow() {
        let tokens = state.withLock { state -> [(central: CentralManager, token: ScanToken)] in
            guard !state.unheard.isEmpty, !state.inWindow, !state.tokens.isEmpty else { return [] }
            state.inWindow = true
            state.windows += 1
            return state.tokens
        }
        guard !tokens.isEmpty else { return }
        let names = state.withLock { $0.unheard.joined(separator: ", ") }
        log(
            .info, "scan mode: active for \(Int(Self.window)) s, for the names of device rules not heard yet (\(names))"
        )
        for (central, token) in tokens { central.assumeLoopIsolated { $0.setScanMode(.active, for: token) } }
        schedule(after: Self.window) { $0.closeWindow() }
    }

    private func closeWindow() {
        let (tokens, again) = state.withLock { state -> ([(central: CentralManager, token: ScanToken)], Bool) in
            guard state.inWindow else { return ([], false) }
            state.inWindow = false
            if let timer = state.timer { loop.cancelTimer(timer) }
            state.timer = nil
            return (state.tokens, !state.unheard.isEmpty)
        }
        guard !tokens.isEmpty else { return }
        for (central, token) in tokens { central.assumeLoopIsolated { $0.setScanMode(.passive, for: token) } }
        if again { schedule(after: Self.interval) { $0.openWindow() } }
    }

    private func schedule(after seconds: Double, _ action: @escaping @Sendable (ScanModeController) -> Void) {
        let timer = loop.addTimer(after: seconds) { [weak self] in
            guard let self else { return }
            self.state.withLock { $0.timer = nil }
            action(self)
        }
        state.withLock { $0.timer = timer }
    }
}
