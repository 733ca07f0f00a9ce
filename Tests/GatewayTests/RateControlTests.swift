import Bluetooth
import Gateway
import Testing

@Suite("Rate control on the clock")
struct RateControlTests {
    static let sensor = address("A4:C1:38:00:00:01")

    static func temperature(_ value: Double) -> BLEDiscovery {
        let raw = Int16((value * 100).rounded())
        let bits = UInt16(bitPattern: raw)
        return bthome(sensor, payload: [0x40, 0x02, UInt8(bits & 0xFF), UInt8(bits >> 8)])
    }

    func harness(_ rate: String) async throws -> Harness {
        let harness = try Harness(#"{"devices": [{"match": {"services": ["FCD2"]}, \#(rate)}]}"#)
        try await harness.start()
        return harness
    }

    func states(_ harness: Harness) -> [String] { harness.mqtt.payloads(on: "gattway/A4C138000001") }

    @Test("min_interval: one message per interval; readings in between go out, merged, when it ends")
    func minInterval() async throws {
        let harness = try await harness(#""min_interval": "10s""#)
        await harness.gateway.handle(Self.temperature(20))
        await harness.advance(2)
        await harness.gateway.handle(Self.temperature(21))
        await harness.advance(2)
        await harness.gateway.handle(Self.temperature(22))
        #expect(states(harness).count == 1)
        await harness.advance(5.9)
        #expect(states(harness).count == 1)
        await harness.advance(0.1)
        #expect(states(harness).count == 2)
        #expect(states(harness).last?.hasPrefix(#"{"temperature":22,"#) == true)
        await harness.advance(30)
        #expect(states(harness).count == 2)
    }

    @Test("only_changes: identical readings are not republished")
    func onlyChanges() async throws {
        let harness = try await harness(#""only_changes": true"#)
        await harness.gateway.handle(Self.temperature(20))
        await harness.gateway.handle(Self.temperature(20))
        await harness.gateway.handle(Self.temperature(20.01))
        #expect(states(harness).count == 2)
    }

    @Test("thresholds: changes smaller than the threshold (against the last published value) are dropped")
    func thresholds() async throws {
        let harness = try await harness(#""thresholds": {"temperature": 0.5}"#)
        await harness.gateway.handle(Self.temperature(20))
        await harness.gateway.handle(Self.temperature(20.3))
        await harness.gateway.handle(Self.temperature(20.4))
        #expect(states(harness).count == 1)
        await harness.gateway.handle(Self.temperature(20.5))
        #expect(states(harness).count == 2)
        #expect(states(harness).last?.hasPrefix(#"{"temperature":20.5,"#) == true)
    }

    @Test("heartbeat: the state is republished on the clock when nothing changed")
    func heartbeat() async throws {
        let harness = try await harness(#""only_changes": true, "heartbeat": "60s""#)
        await harness.gateway.handle(Self.temperature(20))
        await harness.advance(30)
        await harness.gateway.handle(Self.temperature(20))
        #expect(states(harness).count == 1)
        await harness.advance(30)
        #expect(states(harness).count == 2)
        await harness.advance(59)
        #expect(states(harness).count == 2)
        await harness.advance(1)
        #expect(states(harness).count == 3)
    }
}
