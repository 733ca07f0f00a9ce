import BlueZSimulator
import Bluetooth
import JSON

extension FuzzTargets {
    /// Simulator scenario files (`gattway simulate --scenario FILE`, docs/simulator.md) through
    /// ``Scenario/parse(_:)``, then what the simulator computes from a parsed scenario without a
    /// bus: every payload generator stepped a few times (number formats, sensor templates) and
    /// every duration as the simulator's timers take it. Properties: no trap, no hang; every
    /// duration is finite, not negative and fits the simulator's nanosecond timers
    /// (``DurationText.maximumSeconds``); generated payloads have their format's size.
    static let scenario = FuzzTarget(
        name: "scenario",
        summary: "simulator scenario files through Scenario.parse and the payload generators",
        seeds: { ScenarioSeeds.all },
        run: { bytes in
            guard let scenario = try? Scenario.parse(bytes) else { return }
            var durations: [Double] = [
                scenario.timing.disconnectDelay, scenario.timing.temporaryTimeout,
                scenario.timing.resolveDelay, scenario.timing.gattLatency,
            ]
            durations += scenario.links.map(\.interval)
            durations += scenario.events.map(\.at)
            for event in scenario.events { if case .crash(let restart?) = event.action { durations.append(restart) } }
            for device in scenario.devices {
                durations += [device.interval, device.faults.connectDelay, device.faults.connectTimeout]
                if let drop = device.faults.linkDropAfter { durations.append(drop) }
                for payload in device.manufacturerData.map(\.payload) + device.serviceData.map(\.payload) {
                    step(payload, address: device.address, seed: scenario.seed)
                }
                for service in device.services {
                    for characteristic in service.characteristics {
                        if let every = characteristic.notifyInterval { durations.append(every) }
                        step(characteristic.value, address: device.address, seed: scenario.seed)
                        if let notify = characteristic.notifyValue {
                            step(notify, address: device.address, seed: scenario.seed)
                        }
                    }
                }
            }
            for duration in durations {
                fuzzProperty(
                    duration.isFinite && duration >= 0 && duration <= DurationText.maximumSeconds,
                    "scenario duration \(duration) s does not fit the simulator's timers")
                // As the simulator arms its timers (EventLoop.addTimer, the advertising schedule).
                _ = UInt64(duration * 1e9)
            }
        })

    /// Steps a payload generator as the simulator does for each report or notification.
    static func step(_ payload: PayloadSpec, address: BluetoothAddress, seed: UInt64) {
        switch payload {
        case .bytes:
            break
        case .number(let generator, let format):
            var source = NumberSource(generator, seed: seed)
            for _ in 0..<4 {
                let bytes = format.encode(source.next())
                fuzzProperty(
                    bytes.count == (format.layout == .float32le ? 4 : bytes.count),
                    "number format gave \(bytes.count) bytes")
            }
        case .template(let template, let fields):
            var sources = fields.keys.sorted().enumerated().map {
                ($0.element, NumberSource(fields[$0.element]!, seed: seed &+ UInt64($0.offset)))
            }
            for _ in 0..<4 {
                var values: [String: Double] = [:]
                for index in sources.indices { values[sources[index].0] = sources[index].1.next() }
                fuzzProperty(
                    !template.encode(values, address: address).isEmpty, "template \(template.rawValue) gave no bytes")
            }
        }
    }
}

/// Seeds for ``FuzzTargets/scenario``: the scenario files of the repository (the real-BlueZ
/// differential scenario, the conformance lane's linked scenario), the built-in demo scenario,
/// and the docs' scenario examples.
enum ScenarioSeeds {
    static let all: [[UInt8]] = {
        var seeds: [[UInt8]] = []
        for path in ["Tests/RealBlueZ/simulator-scenario.json", "Tests/Conformance/linked-scenario.json"] {
            if let bytes = FixtureFiles.repositoryFile(path) { seeds.append(bytes) }
        }
        seeds.append(Array(DemoScenario.json.utf8))
        for block in FixtureFiles.markdownJSONBlocks("docs/simulator.md") {
            let first = block.first { $0 != 0x20 && $0 != 0x0A }
            seeds.append(first == UInt8(ascii: "\"") ? Array("{".utf8) + block + Array("}".utf8) : block)
        }
        for path in FixtureFiles.repositoryFiles(in: "Tests/BlueZSimulatorTests", suffix: ".swift") {
            seeds += FixtureFiles.swiftJSONLiterals(path).filter {
                String(decoding: $0, as: UTF8.self).contains("\"devices\"")
            }
        }
        return seeds
    }()
}
