import Bluetooth
import EventLoop
import Gateway
import GatewayFakes
import JSON
import Synchronization

/// A gateway wired to in-memory ports and a manual clock, on an event loop of its own.
///
/// Deterministic: the core, its jobs and the fakes' deliveries all run on that one loop thread
/// in the order they were queued, and nothing waits on real time, so ``settle()`` (the loop has
/// nothing left to run) is when the outcome of an input can be looked at.
final class Harness {
    let config: GatewayConfig
    let ble = InMemoryBLE()
    let mqtt = InMemoryMQTT()
    let clock = ManualClock(wallMilliseconds: 1_796_058_000_000)
    let peripheral = InMemoryPeripheral()
    let loop = EventLoop(name: "gateway-test")
    let gateway: Gateway
    private var jobs: Task<Void, Never>?

    /// Home Assistant discovery and `bridge/health` are off unless the config text names
    /// `homeassistant` / `health` (they add messages and hold first states back).
    init(
        _ configText: String, retryDelay: Double = 5, logger: GatewayLogger = .none, stateDirectory: String? = nil,
        processSample: @escaping @Sendable () -> ProcessSample? = { nil },
        reconnect: (@Sendable () -> any ReconnectStrategy)? = nil, radioView: Bool = false
    ) throws {
        var text = configText
        if let brace = text.firstIndex(of: "{") {
            var defaults: [String] = []
            if !text.contains("\"homeassistant\"") { defaults.append(#""homeassistant": {"enabled": false}"#) }
            if !text.contains("\"health\"") { defaults.append(#""health": {"enabled": false}"#) }
            let rest = text[text.index(after: brace)...].drop(while: { $0 == " " || $0 == "\n" })
            if !defaults.isEmpty {
                text = "{" + defaults.joined(separator: ", ") + (rest.hasPrefix("}") ? "" : ", ") + rest
            }
        }
        config = try GatewayConfig.parse(Array(text.utf8))
        mqtt.loop = loop
        gateway = Gateway(
            config: config, ble: ble, peripheral: peripheral, mqtt: mqtt, clock: clock, loop: loop,
            reconnect: reconnect ?? { FixedReconnectDelay(delay: retryDelay) }, logger: logger,
            stateDirectory: stateDirectory, processSample: processSample, radioView: radioView)
    }

    deinit {
        jobs?.cancel()
        loop.shutdown()
    }

    /// Starts the gateway and its jobs, and settles.
    func start() async throws {
        let gateway = self.gateway
        // On the loop from its first step, so a settle never misses the runner's start.
        if jobs == nil { jobs = Task(executorPreference: loop.taskExecutor) { await gateway.run() } }
        try await gateway.start()
        await settle()
    }

    /// Stops the gateway (after its jobs) and settles.
    func stop() async {
        jobs?.cancel()
        await jobs?.value
        await gateway.stop()
        await settle()
    }

    /// Begins the stop as `gattway run` does (the jobs first, then ``Gateway/stop(timeout:)``) in a
    /// task on the loop, and returns without waiting for it: ``StopProgress/returned`` says when
    /// `stop` returned (after a settle). Its waits are on the manual clock.
    func beginStop(timeout: Double = Gateway.stopTimeout) async -> StopProgress {
        jobs?.cancel()
        await jobs?.value
        let progress = StopProgress()
        let gateway = self.gateway
        Task(executorPreference: loop.taskExecutor) {
            await gateway.stop(timeout: timeout)
            progress.finished()
        }
        await settle()
        return progress
    }

    /// Returns once the loop has nothing left to run: every input so far has been handled, and
    /// every job is done or waits for the clock or a fake's gate.
    func settle() async {
        await loop.settle()
    }

    /// Advances the clock, runs what is due and settles.
    func advance(_ seconds: Double) async {
        clock.advance(by: seconds)
        await settle()
        await gateway.tick()
        await settle()
    }

    /// A message on a peripheral `from_topic`, handled, and the port calls it makes done.
    func source(_ topic: String, _ payload: String) async {
        await gateway.handle(peripheralSource: MQTTInboundMessage(topic: topic, payload: Array(payload.utf8)))
        await settle()
    }

    /// Sends a command as a client would and returns the responses on `responseTopic` once the
    /// gateway settled.
    @discardableResult
    func command(
        _ topic: String, _ payload: String, responseTopic: String, correlation: [UInt8]? = nil,
        mqtt5ResponseTopic: String? = nil
    ) async -> [MQTTOutboundMessage] {
        await gateway.handle(
            MQTTInboundMessage(
                topic: topic, payload: Array(payload.utf8), responseTopic: mqtt5ResponseTopic,
                correlationData: correlation))
        await settle()
        return mqtt.messages(on: responseTopic)
    }
}

/// Whether a stop begun by ``Harness/beginStop(timeout:)`` has returned.
final class StopProgress: Sendable {
    private let done = Mutex(false)
    var returned: Bool { done.withLock { $0 } }
    func finished() { done.withLock { $0 = true } }
}

func address(_ text: String) -> BluetoothAddress {
    BluetoothAddress(text) ?? BluetoothAddress(rawValue: 0)
}

func json(_ text: String) -> JSONValue? { try? JSONValue.parse(Array(text.utf8)) }

/// A BTHome v2 advertisement: temperature 25.06 °C, humidity 50.55 %.
func bthome(
    _ address: BluetoothAddress, rssi: Int16 = -60, payload: [UInt8] = [0x40, 0x02, 0xCA, 0x09, 0x03, 0xBF, 0x13]
)
    -> BLEDiscovery
{
    BLEDiscovery(
        address: address, advertisement: AdvertisementData(serviceData: [BluetoothUUID(0xFCD2): payload], rssi: rssi))
}
