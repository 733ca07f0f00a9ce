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
    /// The web page's event stream's marks of each device's state and availability messages
    /// (``DeviceEvents``); nil while nobody watches, so publishing does nothing more then. Read
    /// with every state message, without the run-time exclusivity check: loop-confined, and
    /// only ever set in one instantaneous access (``Gateway/observeDeviceEvents(_:)``).
    @exclusivity(unchecked) var deviceEvents: DeviceEvents?
    /// Hands an event to the core (``CoreInbox``); closures given to ports and jobs capture it
    /// to bring what they deliver back to the loop.
    let deliver: @Sendable (CoreEvent) -> Void

    init(
        config: GatewayConfig, stateDirectory: String?, clock: any GatewayClock, log: GatewayLogger,
        ble: any BLEPort, output: Output, loop: EventLoop, inbox: CoreInbox
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
        self.deliver = { inbox.deliver($0) }
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

    /// The device rule at `index` of config.json.
    func rule(_ index: Int) -> DeviceRule { config.devices[index] }
}
