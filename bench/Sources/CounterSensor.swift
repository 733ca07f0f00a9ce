import BlueZSimulator
import EventLoop
import Foundation

/// A connected sensor whose value the soak notifies itself, so every reading is known: the n-th
/// notification the simulator accepted carries `n % modulus` (the battery level as u8 0…100, or
/// the temperature in 0.01 °C as s16le). A notification refused because the device is not
/// connected or not subscribed (during a fault) is tried again at the next tick with the same
/// value, so the values the sensor sent are exactly 0, 1, 2, … in order, each with its time.
final class CounterSensor: Sendable {
    enum Encoding: Sendable {
        /// One byte: Battery Level 2A19 (0…100 %).
        case u8
        /// s16 little endian in 0.01 units: Temperature 2A6E.
        case centiS16LE
    }

    /// One notification the simulator took.
    struct Emission: Sendable {
        var value: Int
        /// Seconds on the monotonic clock.
        var time: Double
    }

    /// gattway's topic name for the device (`gattway/<name>`) and the attribute carrying the value.
    let name: String
    let attribute: String
    let address: String
    let uuid: String
    let encoding: Encoding
    let modulus: Int
    /// Seconds between notifications.
    let interval: Double
    private let emitted = Locked<[Emission]>([])
    private let task = Locked<Task<Void, Never>?>(nil)

    init(
        name: String, attribute: String, address: String, uuid: String, encoding: Encoding, modulus: Int,
        interval: Double
    ) {
        self.name = name
        self.attribute = attribute
        self.address = address
        self.uuid = uuid
        self.encoding = encoding
        self.modulus = modulus
        self.interval = interval
    }

    /// The battery sensor: 2 readings a second, 0…100.
    static let battery = CounterSensor(
        name: "battery_sensor", attribute: "battery", address: SoakScenario.battery, uuid: "2A19", encoding: .u8,
        modulus: 101,
        interval: 0.5)
    /// The environmental sensor's temperature: 1 reading a second, 0.00…299.99 °C.
    static let environment = CounterSensor(
        name: "env_sensor", attribute: "temperature", address: SoakScenario.environment, uuid: "2A6E",
        encoding: .centiS16LE,
        modulus: 30_000, interval: 1)

    var emissions: [Emission] { emitted.value.withLock { $0 } }

    /// The value a received reading of `attribute` stands for (the temperature × 100, rounded).
    func counterValue(_ reading: Double) -> Int {
        switch encoding {
        case .u8: Int(reading.rounded())
        case .centiS16LE: Int((reading * 100).rounded())
        }
    }

    func bytes(_ value: Int) -> [UInt8] {
        switch encoding {
        case .u8: [UInt8(truncatingIfNeeded: value)]
        case .centiS16LE: [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8)]
        }
    }

    /// Notifies every `interval` until ``stop()``.
    func start(_ simulator: BlueZSimulator) {
        let handle = Task { [self] in
            var next = Soak.monotonic()
            while !Task.isCancelled {
                let index = emitted.value.withLock { $0.count }
                let value = index % modulus
                if (try? await simulator.notify(address: address, uuid: uuid, bytes(value))) != nil {
                    let now = Soak.monotonic()
                    emitted.value.withLock { $0.append(Emission(value: value, time: now)) }
                }
                next += interval
                let wait = next - Soak.monotonic()
                if wait > 0 {
                    try? await Task.sleep(for: .milliseconds(Int64(wait * 1000)))
                } else {
                    next = Soak.monotonic()
                }
            }
        }
        task.value.withLock { $0 = handle }
    }

    func stop() {
        task.value.withLock { $0?.cancel() }
    }
}
