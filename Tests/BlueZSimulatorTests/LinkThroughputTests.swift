import BlueZSimulator
import Bluetooth
import DBus
import Foundation
import Testing

/// `timing.connection_interval`: the link carries `packets_per_event` ATT PDUs per connection
/// event, so write commands (answered at once, as bluetoothd answers them) reach the peer at the
/// link's rate, in order, and a write request is answered a connection event after it left.
@Suite("Simulator link throughput (connection interval × packets per event)")
struct LinkThroughputTests {
    static let device = "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"
    static let address = "C0:FF:EE:00:00:01"
    static let sink = device + "/service000a/char000b"

    static func scenario(latency: String = "0") -> String {
        """
        {"timing": {"disconnect_delay": "50ms", "temporary_timeout": "30s", "resolve_delay": "10ms",
                    "gatt_latency": "\(latency)", "mtu": 247, "connection_interval": "15ms", "packets_per_event": 4},
         "devices": [{"address": "\(address)", "name": "Bulk", "interval": "20ms", "service_uuids": ["fe59"],
                      "gatt": [{"uuid": "fe59", "characteristics": [
                        {"uuid": "ff10", "flags": ["write", "write-without-response"]}]}]}]}
        """
    }

    static func connect(_ client: Client) async throws {
        let log = try await client.signals()
        try await client.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
        try await log.wait(for: "device found") { $0.isInterfacesAdded(Self.device) }
        try await client.call(Self.device, Client.device, "Connect")
        try await eventually("ServicesResolved") {
            try await client.get(Self.device, Client.device, "ServicesResolved")?.bool == true
        }
    }

    static func options(_ type: String) -> DBusValue { .variantDictionary([("type", .string(type))]) }

    @Test("write commands reach the peer at 4 × 244 bytes per 15 ms, in order")
    func commandsDrainAtTheLinkRate() async throws {
        try await SimulatorHarness.run(Self.scenario()) { harness in
            let client = try await harness.client()
            try await Self.connect(client)
            let chunks = (0..<80).map { index in (0..<244).map { UInt8(truncatingIfNeeded: index &* 31 &+ $0) } }
            for chunk in chunks {
                try await client.call(
                    Self.sink, Client.characteristic, "WriteValue", [.bytes(chunk), Self.options("command")])
            }
            let address = try #require(BluetoothAddress(Self.address))
            let uuid = try #require(BluetoothUUID("ff10"))
            try await eventually("every write arrived") {
                await harness.simulator.received(device: address, uuid: uuid).writes == chunks.count
            }
            let received = await harness.simulator.received(device: address, uuid: uuid)
            #expect(received.bytes == 80 * 244)
            #expect(received.checksum == ReceivedBytes.checksum(of: chunks.flatMap { $0 }))
            // 20 connection events: the first and the last write are 19 intervals apart at least.
            let span = (received.last ?? 0) - (received.first ?? 0)
            #expect(span >= 19 * 0.015 * 0.95, "arrived over \(span) s")
        }
    }

    @Test("a write request is answered in a later connection event (and after gatt_latency)")
    func requestsTakeARoundTrip() async throws {
        try await SimulatorHarness.run(Self.scenario(latency: "40ms")) { harness in
            let client = try await harness.client()
            try await Self.connect(client)
            let started = Date()
            for index in 0..<5 {
                try await client.call(
                    Self.sink, Client.characteristic, "WriteValue", [.bytes([UInt8(index)]), Self.options("request")])
            }
            // Each: out in a connection event, the response 3 intervals (45 ms ≥ 40 ms) later.
            let elapsed = Date().timeIntervalSince(started)
            #expect(elapsed >= 5 * 0.045 * 0.95, "5 requests in \(elapsed) s")
            let address = try #require(BluetoothAddress(Self.address))
            let received = await harness.simulator.received(device: address, uuid: try #require(BluetoothUUID("ff10")))
            #expect(received.writes == 5 && received.checksum == ReceivedBytes.checksum(of: [0, 1, 2, 3, 4]))
        }
    }
}
