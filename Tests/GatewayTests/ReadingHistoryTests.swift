import Bluetooth
import Gateway
import JSON
import Parsers
import Testing

@testable import Gateway

@Suite("The readings history behind the web page's charts")
struct ReadingHistoryTests {
    static let device = DeviceID(slot: 0)
    static let other = DeviceID(slot: 3)
    static let start = 1_796_058_000.0

    static func points(_ chart: ReadingHistory.Chart?) -> [Float] { chart?.points.map(\.value) ?? [] }

    @Test("readings within one step become one point, their mean; each tier keeps at most its points")
    func stepsAndBounds() {
        let history = ReadingHistory(
            recent: .init(step: 2, points: 5), older: .init(step: 10, points: 3), maxSeries: 10)
        // Two readings in the first 2 s step, then one per step for 60 s.
        history.record(Self.device, [Reading("t", 10)], wall: Self.start)
        history.record(Self.device, [Reading("t", 20)], wall: Self.start + 1)
        var chart = history.charts(Self.device).first
        #expect(chart?.name == "t")
        #expect(Self.points(chart) == [15])
        #expect(chart?.points.first?.time == Int64(Self.start * 1000))
        for second in stride(from: 2, through: 60, by: 2) {
            history.record(Self.device, [Reading("t", Double(second))], wall: Self.start + Double(second))
        }
        chart = history.charts(Self.device).first
        // The recent ring keeps its last 5 closed steps (50…58), then the open one (60); the older
        // ring its last 3 closed 10 s steps (30–39, 40–49, 50–59; the earlier ones dropped), of
        // which those before the recent ring's first point come first: means 34 and 44.
        #expect(Self.points(chart) == [34, 44, 50, 52, 54, 56, 58, 60])
        let times = chart?.points.map(\.time) ?? []
        #expect(times == times.sorted())
        #expect(times.last == Int64((Self.start + 60) * 1000))
    }

    @Test("strings, booleans, lists, null and non-finite numbers are not charted")
    func numbersOnly() {
        let history = ReadingHistory()
        history.record(
            Self.device,
            [
                Reading("name", string: "x"), Reading("open", bool: true),
                Reading(name: "list", value: .numbers([1, 2])), Reading(name: "none", value: .null),
                Reading("nan", .nan), Reading("inf", .infinity), Reading("t", 1),
            ], wall: Self.start)
        #expect(history.charts(Self.device).map(\.name) == ["t"])
        #expect(history.seriesCount == 1)
    }

    @Test("series beyond the bounds (all, per device) are refused and counted; a removal frees them")
    func seriesBound() {
        let history = ReadingHistory(maxSeries: 3)
        history.record(Self.device, [Reading("a", 1), Reading("b", 2)], wall: Self.start)
        history.record(Self.other, [Reading("c", 3), Reading("d", 4)], wall: Self.start)
        #expect(history.seriesCount == 3)
        #expect(history.refused == 1)
        #expect(history.charts(Self.other).map(\.name) == ["c"])
        history.removed(Self.device)
        #expect(history.seriesCount == 1)
        #expect(history.charts(Self.device).isEmpty)
        history.record(Self.other, [Reading("c", 3), Reading("d", 4)], wall: Self.start + 1)
        #expect(history.charts(Self.other).map(\.name) == ["c", "d"])
        #expect(history.seriesCount == 2)

        let many = ReadingHistory(maxSeries: 1000)
        let readings = (0..<(ReadingHistory.maxAttributes + 5)).map { Reading("r\($0)", Double($0)) }
        many.record(Self.device, readings, wall: Self.start)
        #expect(many.seriesCount == ReadingHistory.maxAttributes)
        #expect(many.refused == 5)
    }

    @Test("a day of readings every second stays within the tiers' points and the bytes a series may take")
    func longRun() {
        let history = ReadingHistory()
        for second in 0..<86_400 {
            history.record(Self.device, [Reading("t", Double(second % 100))], wall: Self.start + Double(second))
        }
        let chart = history.charts(Self.device)[0]
        let tiers = ReadingHistory.defaultTiers
        #expect(chart.points.count <= tiers.recent.points + tiers.older.points + 1)
        // The oldest point is 6 h back (plus the recent tier's 15 minutes), not a day.
        let span = Double(chart.points.last!.time - chart.points.first!.time) / 1000
        #expect(span <= tiers.older.step * Double(tiers.older.points) + tiers.recent.step * Double(tiers.recent.points))
        #expect(span >= 6 * 3600)
        #expect(history.seriesBytes <= 8 * 1024 + 128)
        #expect(ReadingHistory.defaultMaxSeries * history.seriesBytes <= 11 * 512 * 1024)
    }

    @Test("the gateway records what it publishes: Gateway.history(of:) has the device's series with units")
    func throughTheGateway() async throws {
        let sensor = address("A4:C1:38:00:00:01")
        let harness = try Harness(
            """
            {"bluetooth": {"scan": {"services": []}}, "devices": [{"match": {"services": ["FCD2"]}}]}
            """)
        try await harness.start()
        await harness.gateway.handle(bthome(sensor, rssi: -60))
        await harness.advance(3)
        await harness.gateway.handle(bthome(sensor, rssi: -60, payload: [0x40, 0x02, 0xCB, 0x09, 0x03, 0xBF, 0x13]))
        await harness.settle()
        let history = await harness.gateway.history(of: "A4C138000001")
        #expect(history?["device"] == .string("A4C138000001"))
        guard case .array(let series)? = history?["series"] else {
            Issue.record("no series: \(String(describing: history))")
            return
        }
        #expect(series.map { $0["name"] } == [.string("temperature"), .string("humidity")])
        #expect(series.first?["unit"] == .string("°C"))
        guard case .array(let points)? = series.first?["points"] else { return }
        #expect(points.count == 2)
        if case .array(let last)? = points.last, case .number(let value)? = last.last {
            #expect(abs(value - 25.07) < 0.001)
        }
        #expect(await harness.gateway.history(of: "nobody") == nil)
    }
}
