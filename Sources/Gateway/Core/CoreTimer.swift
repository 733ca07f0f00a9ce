import EventLoop

/// The core's one timer (docs/architecture.md, "Timers"). A feature that makes something due asks
/// for it with ``CoreContext/due(at:)``; after each event the gateway arms the timer for the
/// earliest deadline asked for (``settle()``), and when it has fired and run what was due, for
/// the next deadline over all features (``arm(_:)``). Armed only between ``start(fire:)`` and
/// ``stop()``. Loop-confined.
final class CoreTimer {
    private let clock: any GatewayClock
    private let loop: EventLoop
    private var timer: ClockTimer?
    /// When the armed timer fires (infinity: not armed).
    private var armedFor = Double.infinity
    /// The earliest deadline asked for since the last ``settle()``.
    private var wanted = Double.infinity
    /// What firing does (nil: stopped, nothing is armed).
    private var fire: (@Sendable () -> Void)?

    init(clock: any GatewayClock, loop: EventLoop) {
        self.clock = clock
        self.loop = loop
    }

    /// Something becomes due at `deadline` (monotonic seconds).
    func due(at deadline: Double) {
        if deadline < wanted { wanted = deadline }
    }

    /// The gateway started: the timer calls `fire` when it fires.
    func start(fire: @escaping @Sendable () -> Void) {
        self.fire = fire
    }

    /// After an event: the timer fires by the earliest deadline asked for meanwhile.
    func settle() {
        let deadline = wanted
        wanted = .infinity
        arm(deadline)
    }

    /// Makes sure the timer fires by `deadline` (re-arming it when it would fire later).
    func arm(_ deadline: Double) {
        guard let fire, deadline < armedFor else { return }
        timer?.cancel()
        armedFor = deadline
        timer = clock.schedule(at: deadline, on: loop, fire)
    }

    /// The timer fired: it is not armed any more.
    func fired() {
        timer = nil
        armedFor = .infinity
    }

    /// The gateway stops: the timer is cancelled and stays off.
    func stop() {
        timer?.cancel()
        fired()
        fire = nil
    }
}
