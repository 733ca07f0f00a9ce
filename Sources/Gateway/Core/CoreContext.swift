import Bluetooth
import EventLoop

/// What every feature of the core shares: the configuration, the clock, the log, the BLE port,
/// the output (with the MQTT port), the jobs, the timer and the counters. One per gateway; loop-confined like the features that
/// hold it.
final class CoreContext {
    let config: GatewayConfig
    /// Where the store-and-forward queue file and the runtime bind keys live (nil: in memory
    /// only): `--state-dir`, else `state_directory` of config.json.
    let stateDirectory: String?
    /// `mqtt.base_topic`.
    let base: String
    /// The gateway's own topics: ``GatewayConfig/bridgeTopic``.
    let bridge: String
    let clock: any GatewayClock
    let log: GatewayLogger
    let ble: any BLEPort
    let output: Output
    let jobs: JobRunner
    let loop: EventLoop
    let timer: CoreTimer
    /// What the gateway did so far (``Output/published`` is counted by the output).
    var counters = GatewayCounters()
    /// Hands an event to the core: set by ``Gateway/start()``; closures given to ports and jobs
    /// capture it to bring what they deliver back to the loop.
    var deliver: @Sendable (CoreEvent) -> Void = { _ in }
    /// In a fleet: whether this gateway owns a device, the one question the features ask the
    /// fleet (set by the gateway; nil: not in a fleet, every device is this gateway's).
    var fleetOwner: ((BluetoothAddress) -> Bool)?

    init(
        config: GatewayConfig, stateDirectory: String?, clock: any GatewayClock, log: GatewayLogger,
        ble: any BLEPort, output: Output, loop: EventLoop
    ) {
        self.config = config
        self.stateDirectory = stateDirectory
        self.base = config.mqtt.baseTopic
        self.bridge = config.bridgeTopic
        self.clock = clock
        self.log = log
        self.ble = ble
        self.output = output
        self.jobs = JobRunner()
        self.loop = loop
        self.timer = CoreTimer(clock: clock, loop: loop)
    }

    /// Something becomes due at `deadline` (monotonic seconds): the gateway's timer fires by then.
    func due(at deadline: Double) { timer.due(at: deadline) }

    /// ``counters`` with what the output published: what `bridge/health` and
    /// ``Gateway/counters`` report.
    var reportedCounters: GatewayCounters {
        var reported = counters
        reported.published = output.published
        return reported
    }

    /// Whether this gateway publishes, connects and commands the device: always, unless a fleet
    /// gave it to another gateway (docs/fleet.md).
    func owns(_ address: BluetoothAddress) -> Bool { fleetOwner?(address) ?? true }

    /// The device rule at `index` of config.json.
    func rule(_ index: Int) -> DeviceRule { config.devices[index] }
}
