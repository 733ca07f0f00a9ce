import Gateway
import Synchronization

/// Starts services in order, runs them until the termination signal (or a failure), and stops
/// them in reverse within one ``StopDeadline``; returns the process's exit code, decided here
/// and only here (``ExitCode/init(for:)``).
///
/// The order is data: the ``stages``, each a list of services. Services start one after another
/// in the order of the stages and of the services in each; stages stop in reverse order, the
/// services of one stage at the same time (the core's stop and the Bluetooth proxy's share the
/// wait for BlueZ and the broker; MQTT DISCONNECT and the BlueZ managers' close share the last
/// half second). A stage that has not stopped by the end of its ``Window`` (plus ``slack``) is
/// logged, cancelled and no longer waited for: the stages after it stop all the same. (A service
/// that ignores cancellation still holds the group's return — every task here is a child task —
/// and, in `gattway run`, the SIGALRM backstop ends the process at 5 s.)
///
/// The stop begins when the termination signal arrives (logged as `SIGTERM: stopping`), when a
/// service's ``Service/start()`` throws (that one and those before it are stopped) or when a
/// service's ``Service/run()`` throws. A signal during the start cancels the start under way.
///
/// Modelled on swift-service-lifecycle's `ServiceGroup` (services as data, one group that owns
/// their tasks, graceful shutdown in reverse order), with explicit start and stop steps and
/// stages stopped at the same time, which the gateway's bounded stop needs.
public struct ServiceGroup: Sendable {
    /// Services that start one after another and stop at the same time.
    public struct Stage: Sendable {
        public var services: [any Service]
        public var window: Window

        public init(_ services: [any Service], window: Window) {
            self.services = services
            self.window = window
        }
    }

    /// How long a stage may take to stop (then ``slack`` more before it is cut off).
    public enum Window: Sendable {
        /// Until the deadline's `waitLimit` after the stop began: the waits for BlueZ and the broker.
        case wait
        /// The deadline's `closeRemaining` from when the stage begins to stop: the last step.
        case close
    }

    public let stages: [Stage]
    /// Set once by the first SIGTERM or SIGINT (``SignalSources/termination()``) with its name.
    public let termination: OneShot<String>
    public let log: GatewayLogger
    /// Added to a stage's window before it is cut off: a service that bounds its own stop by the
    /// same deadline (and logs what it had to cancel) has ended by then.
    public let slack: Double
    /// Begins the stop's deadline (`gattway run`: ``StopDeadline/begin()``, which arms the backstop).
    public let beginStop: @Sendable () -> StopDeadline

    public init(
        _ stages: [Stage], termination: OneShot<String>, log: GatewayLogger, slack: Double = 0.5,
        beginStop: @escaping @Sendable () -> StopDeadline = { StopDeadline.begin() }
    ) {
        self.stages = stages
        self.termination = termination
        self.log = log
        self.slack = slack
        self.beginStop = beginStop
    }

    /// Starts, runs and stops the services; returns once every one of their tasks ended.
    public func run() async -> ExitCode {
        let services = stages.flatMap(\.services)
        let controls = services.map { _ in Control() }
        let failed = OneShot<Failure>()
        return await withDiscardingTaskGroup(returning: ExitCode.self) { children in
            // Start, in order; each started service's run() becomes a child task at once.
            var toStop = 0
            var running = Set<Int>()
            var ending: Ending?
            for (index, service) in services.enumerated() {
                let outcome = await start(service)
                toStop = index + 1
                if outcome.started {
                    running.insert(index)
                    let control = controls[index]
                    children.addTask { await Self.runService(service, control, failed) }
                }
                if let signal = outcome.signal {
                    ending = .signal(signal)
                    break
                }
                if let error = outcome.error {
                    ending = .failure(Failure(name: service.name, error: error))
                    break
                }
            }
            // Run until the signal or a failure.
            if ending == nil {
                ending = await withTaskGroup(of: Ending?.self) { race in
                    race.addTask { await termination.wait().map(Ending.signal) }
                    race.addTask { await failed.wait().map(Ending.failure) }
                    defer { race.cancelAll() }
                    return await race.next() ?? nil
                }
            }
            let code: ExitCode
            switch ending {
            case .signal(let signal):
                log(.notice, "\(signal): stopping")
                code = .success
            case .failure(let failure):
                log(.error, "\(failure.name): \(failure.error)")
                code = ExitCode(for: failure.error)
            case nil:
                log(.notice, "cancelled: stopping")
                code = .success
            }
            // Stop, stage by stage in reverse; the services of a stage at the same time.
            let deadline = beginStop()
            var remarks: [String] = []
            var offset = 0
            let offsets = stages.map { stage in
                defer { offset += stage.services.count }
                return offset
            }
            for (stage, first) in zip(stages, offsets).reversed() {
                let members = (first..<first + stage.services.count).filter { $0 < toStop }
                guard !members.isEmpty else { continue }
                let window = stage.window == .wait ? deadline.waitRemaining : deadline.closeRemaining
                let pending = Pending(members)
                for index in members {
                    let (service, control, launched) = (services[index], controls[index], running.contains(index))
                    children.addTask {
                        let remark = await Self.cancellable(control.cut) { await service.stop(within: deadline) }
                        control.endRun.set(())
                        if launched { _ = await control.runEnded.wait() }
                        pending.finished(index, remark: remark ?? nil)
                    }
                }
                let inTime = await StopDeadline.bounded(window + slack) { _ = await pending.all.wait() }
                if !inTime {
                    for index in pending.remaining {
                        log(
                            .warning,
                            "stop: \(services[index].name) did not stop within \(String(oneDecimal: deadline.elapsed)) s: "
                                + "cancelled, the stop goes on without it")
                        controls[index].cut.set(())
                    }
                }
                for remark in pending.remarks where !remarks.contains(remark) { remarks.append(remark) }
            }
            log(
                .notice,
                "stopped in \(String(oneDecimal: deadline.elapsed)) s" + remarks.map { " (\($0))" }.joined())
            return code
        }
    }

    /// What ended the running.
    private enum Ending: Sendable {
        case signal(String)
        case failure(Failure)
    }

    private struct Failure: Sendable {
        let name: String
        let error: any Error
    }

    /// One service's ends: `endRun` cancels its run(), `cut` its stop() (and then its run()).
    private final class Control: Sendable {
        let endRun = OneShot<Void>()
        let runEnded = OneShot<Void>()
        let cut = OneShot<Void>()
    }

    /// Starts `service` unless the termination signal comes first (the start is then cancelled).
    private func start(_ service: any Service) async -> (started: Bool, error: (any Error)?, signal: String?) {
        enum Step: Sendable {
            case started
            case failed(any Error)
            case signal(String)
        }
        return await withTaskGroup(of: Step?.self) { race in
            race.addTask {
                do {
                    try await service.start()
                    return .started
                } catch {
                    return .failed(error)
                }
            }
            race.addTask { await termination.wait().map(Step.signal) }
            let first = await race.next() ?? nil
            race.cancelAll()
            switch first {
            case .started: return (true, nil, nil)
            case .failed(let error): return (false, error, nil)
            case .signal(let signal):
                // The start, cancelled, may have finished anyway: then it runs (and is stopped).
                var started = false
                while let step = await race.next() {
                    if case .started = step { started = true }
                }
                return (started, nil, signal)
            case nil: return (false, CancellationError(), nil)
            }
        }
    }

    /// A started service's run(), until ``Control/endRun``; a throw meanwhile ends the group's running.
    private static func runService(_ service: any Service, _ control: Control, _ failed: OneShot<Failure>) async {
        let thrown: (any Error)?? = await cancellable(control.endRun) {
            do {
                try await service.run()
                return nil
            } catch {
                return error
            }
        }
        if let error = thrown ?? nil, !(error is CancellationError), control.endRun.value == nil {
            failed.set(Failure(name: service.name, error: error))
        }
        control.runEnded.set(())
    }

    /// Runs `body` until it returns (its value) or `cut` is set (nil; `body` is cancelled).
    private static func cancellable<T: Sendable>(_ cut: OneShot<Void>, _ body: @escaping @Sendable () async -> T)
        async -> T?
    {
        await withTaskGroup(of: T?.self) { group in
            group.addTask { await body() }
            group.addTask {
                _ = await cut.wait()
                return nil
            }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
    }

    /// The services of one stage still stopping.
    private final class Pending: Sendable {
        private let state: Mutex<(remaining: [Int], remarks: [Int: String])>
        /// Set once every one has stopped.
        let all = OneShot<Void>()

        init(_ members: [Int]) {
            state = Mutex((members, [:]))
        }

        func finished(_ index: Int, remark: String?) {
            let done = state.withLock { state in
                state.remaining.removeAll { $0 == index }
                if let remark { state.remarks[index] = remark }
                return state.remaining.isEmpty
            }
            if done { all.set(()) }
        }

        var remaining: [Int] { state.withLock { $0.remaining } }

        /// Their remarks, in the order of the services.
        var remarks: [String] { state.withLock { $0.remarks.sorted { $0.key < $1.key }.map(\.value) } }
    }
}
