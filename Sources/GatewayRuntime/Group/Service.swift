/// One part of a running process — the MQTT client, a BlueZ manager, the gateway core, the
/// Bluetooth proxy, the systemd notifications — as the ``ServiceGroup`` starts, runs and stops it.
///
/// The life of a service in a group: ``start()`` (the next service starts once it returned), then
/// ``run()`` as a child task of the group, then, at the stop, ``stop(within:)`` while ``run()``
/// still runs, and once that returned ``run()`` is cancelled and awaited. The defaults do nothing,
/// so a service implements only what it needs.
public protocol Service: Sendable {
    /// Names the service in the log: a start or run that fails is logged as `<name>: <error>`, a
    /// stop that is cut off as `stop: <name> did not stop within …`.
    var name: String { get }

    /// Brings the service up. A throw ends the group's start: this service and those started
    /// before it are stopped, in reverse order, and the error decides the exit code
    /// (``ExitCode/init(for:)``). Cancelled when the termination signal arrives meanwhile.
    func start() async throws

    /// The service's background work, from the end of a successful ``start()`` until the group
    /// cancels it (after ``stop(within:)`` returned). Returning early is fine; a throw (other
    /// than on cancellation) begins the group's stop, and the error decides the exit code.
    func run() async throws

    /// Ends the service, within `deadline`: called once, while ``run()`` still runs, and also
    /// after a ``start()`` that threw (whatever it began must be ended). A stop still running at
    /// the end of its stage's window (``ServiceGroup/Window``) is cancelled and no longer waited
    /// for by the stages after it.
    /// - Returns: a remark for the group's last line (`stopped in 0.6 s (<remark>)`), or nil.
    func stop(within deadline: StopDeadline) async -> String?
}

extension Service {
    public func start() async throws {}
    public func run() async throws {}
    public func stop(within deadline: StopDeadline) async -> String? { nil }
}
