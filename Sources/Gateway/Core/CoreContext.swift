import Bluetooth
import EventLoop

/// What every feature of the core shares: the configuration, the clock, the log, the output,
/// the jobs and the counters. One per gateway; loop-confined like the features that hold it.
final class CoreContext {
    let config: GatewayConfig
    /// `mqtt.base_topic`.
    let base: String
    /// The gateway's own topics: ``GatewayConfig/bridgeTopic``.
    let bridge: String
    let clock: any GatewayClock
    let log: GatewayLogger
    let output: Output
    let jobs: JobRunner
    let loop: EventLoop
    /// What the gateway did so far (``Output/published`` is counted by the output).
    var counters = GatewayCounters()
    /// Hands an event to the core: set by ``Gateway/start()``; closures given to ports and jobs
    /// capture it to bring what they deliver back to the loop.
    var deliver: @Sendable (CoreEvent) -> Void = { _ in }
    /// In a fleet: whether this gateway owns a device (set by the gateway; nil: not in a fleet,
    /// every device is this gateway's).
    var fleetOwner: ((BluetoothAddress) -> Bool)?
    /// In a fleet: a command for a device this gateway does not own — true when the fleet holds it
    /// (this gateway is taking the device over); and one it runs, announced.
    var fleetHold: ((BluetoothAddress, MQTTInboundMessage) -> Bool)?
    var fleetRan: ((BluetoothAddress, MQTTInboundMessage) -> Void)?
    /// The earliest deadline a feature asked the timer for since the gateway last looked.
    private(set) var wantedDeadline = Double.infinity

    init(config: GatewayConfig, clock: any GatewayClock, log: GatewayLogger, output: Output, loop: EventLoop) {
        self.config = config
        self.base = config.mqtt.baseTopic
        self.bridge = config.bridgeTopic
        self.clock = clock
        self.log = log
        self.output = output
        self.jobs = JobRunner()
        self.loop = loop
    }

    /// Something becomes due at `deadline` (monotonic seconds): the gateway's timer fires by then.
    func due(at deadline: Double) {
        if deadline < wantedDeadline { wantedDeadline = deadline }
    }

    /// The earliest deadline asked for since the last call (infinity: none).
    func takeWantedDeadline() -> Double {
        defer { wantedDeadline = .infinity }
        return wantedDeadline
    }

    /// Whether this gateway publishes, connects and commands the device: always, unless a fleet
    /// gave it to another gateway (docs/fleet.md).
    func owns(_ address: BluetoothAddress) -> Bool { fleetOwner?(address) ?? true }

    /// The device rule at `index` of config.json.
    func rule(_ index: Int) -> DeviceRule { config.devices[index] }
}
