import BlueZSimulator
import Bluetooth
import EventLoop
import Foundation
import Testing

/// When devices advertise (docs/simulator.md, "Advertising timing"): a random phase of the
/// interval when a scan starts hearing them, advDelay on every event, `aligned` for lockstep.
/// The times are the simulator's own record (``BlueZSimulator/startRecordingReports()``): when each
/// event was due, so the assertions do not depend on how late a loaded machine runs its timers.
@Suite("Advertising timing: random phase, advDelay, aligned")
struct AdvertisingTimingTests {
    static func address(_ index: Int) -> String { "A4:C1:38:7A:00:" + String(format: "%02X", index) }

    static func deviceJSON(_ index: Int, interval: String, aligned: Bool = false) -> String {
        #"{"address": "\#(address(index))", "interval": "\#(interval)", "connectable": false, "aligned": \#(aligned)}"#
    }

    static let scenario = #"{"seed": 7, \#(TestScenarios.timing)}"#

    /// Scans, adds `count` devices in one turn of the simulator's loop, records until each has
    /// reported `reports` times; returns when the adding began and ended, and the reports by device.
    static func addTogether(
        _ harness: SimulatorHarness, count: Int, interval: String, aligned: Bool = false, reports: Int
    ) async throws -> (added: ClosedRange<UInt64>, byDevice: [[ReportTime]]) {
        let client = try await harness.client()
        try await client.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
        await harness.simulator.startRecordingReports()
        let added = try await harness.simulator.addDevices(
            (0..<count).map { deviceJSON($0, interval: interval, aligned: aligned) })
        try await eventually("\(reports) reports of each device", within: 30) {
            await harness.simulator.counterValues().advertisementReports >= count * (reports + 2)
        }
        let times = await harness.simulator.stopRecordingReports()
        await client.close()
        let byDevice = (0..<count).map { index in
            times.filter { $0.address == BluetoothAddress(address(index)) }
        }
        #expect(byDevice.allSatisfy { $0.count >= reports })
        return (added, byDevice)
    }

    /// The most of `instants` (ns) inside any window of `width` seconds.
    static func densest(_ instants: [UInt64], width: Double) -> Int {
        let sorted = instants.sorted()
        var most = 0
        var start = 0
        for end in sorted.indices {
            while Double(sorted[end] - sorted[start]) / 1e9 >= width { start += 1 }
            most = max(most, end - start + 1)
        }
        return most
    }

    @Test("devices added together during a scan report at random phases spread over their interval")
    func addedTogetherSpread() async throws {
        try await SimulatorHarness.run(Self.scenario) { harness in
            let (added, byDevice) = try await Self.addTogether(harness, count: 50, interval: "1s", reports: 2)
            let first = byDevice.compactMap(\.first)
            let phases = first.map { Double($0.due - added.lowerBound) / 1e9 }
            let adding = Double(added.upperBound - added.lowerBound) / 1e9
            #expect(phases.allSatisfy { (0..<(1 + adding)).contains($0) }, "\(phases)")
            // 50 uniform phases over 1 s: a lockstep start would put them all within a few ms.
            #expect(phases.max()! - phases.min()! > 0.8, "\(phases.sorted())")
            #expect(Self.densest(first.map(\.due), width: 0.010) <= 6, "\(phases.sorted())")
            // And as sent, late timers included: not in one turn of the loop (lockstep sends all
            // 50 in one; a loop stalled for a while on a loaded machine sends the few due meanwhile).
            #expect(Self.densest(first.map(\.sent), width: 0.001) <= 25)
            // The second reports stay spread (each device's own advDelay moves it further).
            #expect(Self.densest(byDevice.map { $0[1].due }, width: 0.010) <= 6)
        }
    }

    @Test("each advertising event comes the interval plus 0–10 ms (advDelay) after the last one was due")
    func advDelay() async throws {
        try await SimulatorHarness.run(Self.scenario) { harness in
            let (_, byDevice) = try await Self.addTogether(harness, count: 1, interval: "50ms", reports: 40)
            let times = byDevice[0]
            var delays: [Double] = []
            for (previous, next) in zip(times, times.dropFirst()) {
                var gap = Double(next.due - previous.due) / 1e9
                // A timer more than an interval late skips the events missed (no burst) and keeps
                // the device's phase: whole intervals more, then the same advDelay.
                if previous.sent > previous.due + 50_000_000 {
                    gap -= ((gap - 0.050) / 0.050).rounded(.down) * 0.050
                }
                delays.append(gap - 0.050)
            }
            #expect(delays.count >= 30)
            #expect(delays.allSatisfy { (-1e-6...0.010).contains($0) }, "\(delays)")
            // Random over the range, not a constant: a lockstep schedule has every delay 0.
            #expect(delays.min()! < 0.002 && delays.max()! > 0.008, "\(delays)")
            let mean = delays.reduce(0, +) / Double(delays.count)
            #expect((0.003...0.007).contains(mean), "mean advDelay \(mean)")
        }
    }

    @Test("aligned devices added together advertise together, every interval, without advDelay")
    func alignedTogether() async throws {
        try await SimulatorHarness.run(Self.scenario) { harness in
            let (_, byDevice) = try await Self.addTogether(
                harness, count: 20, interval: "500ms", aligned: true, reports: 3)
            for round in 0..<3 {
                let dues = byDevice.map { $0[round].due }
                #expect(Double(dues.max()! - dues.min()!) / 1e9 < 0.002, "round \(round): \(dues)")
            }
            for times in byDevice {
                let spacing = Double(times[2].due - times[1].due) / 1e9
                #expect(abs(spacing - 0.5) < 0.002, "\(spacing)")
            }
        }
    }

    @Test("the phases come from the scenario's seed: the same seed repeats them, another seed changes them")
    func phasesFromSeed() async throws {
        func phases(seed: Int) async throws -> [Double] {
            let devices = (0..<10).map { Self.deviceJSON($0, interval: "200ms") }.joined(separator: ", ")
            var result: [Double] = []
            try await SimulatorHarness.run(#"{"seed": \#(seed), "devices": [\#(devices)], \#(TestScenarios.timing)}"#) {
                harness in
                let client = try await harness.client()
                await harness.simulator.startRecordingReports()
                // Every device's first event is scheduled from the same moment: the scan's start.
                try await client.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
                try await eventually("a report of each device") {
                    await harness.simulator.counterValues().advertisementReports >= 10 + 10
                }
                let times = await harness.simulator.stopRecordingReports()
                await client.close()
                let first = (0..<10).compactMap { index in
                    times.first { $0.address == BluetoothAddress(Self.address(index)) }?.due
                }
                #expect(first.count == 10)
                let start = first.min() ?? 0
                result = first.map { Double($0 - start) / 1e9 }
            }
            return result
        }
        let once = try await phases(seed: 11)
        let again = try await phases(seed: 11)
        let other = try await phases(seed: 12)
        #expect(zip(once, again).allSatisfy { abs($0 - $1) < 1e-6 }, "\(once) \(again)")
        #expect(zip(once, other).contains { abs($0 - $1) > 0.001 }, "\(once) \(other)")
    }
}

extension AdvertisingTimingTests {
    /// A scan stopped and started again before the devices' next events (gattway restarts its
    /// scan when a filter changes): each device is scheduled once, not once per scan start.
    @Test("a scan stopped and started again within an interval: each device still advertises once per interval")
    func restartedScanDoesNotDoubleTheRate() async throws {
        try await SimulatorHarness.run(Self.scenario) { harness in
            let client = try await harness.client()
            try await client.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            _ = try await harness.simulator.addDevices((0..<5).map { Self.deviceJSON($0, interval: "400ms") })
            for _ in 0..<3 {
                try await client.call("/org/bluez/hci0", Client.adapter, "StopDiscovery")
                try await client.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            }
            await harness.simulator.startRecordingReports()
            try await Task.sleep(for: .seconds(2))
            let times = await harness.simulator.stopRecordingReports()
            await client.close()
            for index in 0..<5 {
                let due = times.filter { $0.address == BluetoothAddress(Self.address(index)) }.map(\.due)
                // Events due at least an interval apart (a device scheduled twice has events closer
                // than that), whatever the length of the recording on a loaded machine.
                #expect(due.count >= 3, "\(Self.address(index)): \(due.count) reports")
                let gaps = zip(due, due.dropFirst()).map { Double($1 - $0) / 1e9 }
                #expect(gaps.allSatisfy { $0 >= 0.399 }, "\(Self.address(index)): \(gaps)")
            }
        }
    }
}

extension BlueZSimulator {
    /// Adds devices in one turn of the loop (as a burst of `AddDevice` calls would, at once);
    /// returns when it began and ended.
    fileprivate func addDevices(_ jsons: [String]) throws -> ClosedRange<UInt64> {
        let start = EventLoop.now()
        for json in jsons { try addDevice(json: json) }
        return start...EventLoop.now()
    }
}
