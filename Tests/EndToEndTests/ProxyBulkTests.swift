import BlueZSimulator
import Bluetooth
import ESPHomeAPI
import EventLoop
import Foundation
import GatewayFakes
import Glibc
import Subprocess
import Testing

/// A bulk transfer through the Bluetooth proxy of `gattway run` (a firmware update's writes without
/// response) to a simulated device whose link drains at 4 × 244 bytes per 7.5 ms, while another
/// client watches advertisements.
@Suite("End to end: a bulk transfer through the Bluetooth proxy")
struct ProxyBulkTests {
    static let device: UInt64 = 0xC0FF_EE00_0001

    static func scenario() throws -> Scenario {
        try Scenario.parse(
            Data(
                #"""
                {"timing": {"disconnect_delay": "50ms", "temporary_timeout": "30s", "resolve_delay": "10ms", "gatt_latency": 0,
                            "mtu": 247, "connection_interval": "7.5ms", "packets_per_event": 4},
                 "devices": [
                   {"address": "C0:FF:EE:00:00:01", "name": "Bulk", "interval": "100ms", "service_uuids": ["fe59"],
                    "gatt": [{"uuid": "fe59", "characteristics": [{"uuid": "ff10", "flags": ["write", "write-without-response"]}]}]},
                   {"address": "A4:C1:38:00:00:0A", "rssi": -60, "interval": "50ms", "connectable": false,
                    "service_data": {"FCD2": {"template": "bthome_v2", "fields": {"temperature": 21.5}}}}]}
                """#.utf8))
    }

    static func connect(_ client: inout ESPHomeTestClient) -> Bool {
        var request = ProtobufWriter()
        request.varint(1, device)
        request.uint32(2, 5)
        request.bool(3, true)  // has_address_type: public (0)
        client.send(type: MessageType.bluetoothDeviceRequest, request.bytes)
        while let message = client.receive() {
            guard message.type == MessageType.bluetoothDeviceConnectionResponse else { continue }
            var reader = ProtobufReader(message.payload)
            var connected = false
            while let (field, value) = try? reader.next() {
                if field == 2 { connected = (try? value.bool(field: field)) ?? false }
            }
            return connected
        }
        return false
    }

    /// Two clients of the proxy at `port`: one that said hello and watches advertisements, one
    /// that said hello and connected the Bulk device (tried a few times while BlueZ learns of it).
    /// The caller closes both.
    static func watcherAndConnectedClient(_ e2e: EndToEnd, port: UInt16) async throws -> (
        watcher: ESPHomeTestClient, client: ESPHomeTestClient
    ) {
        var watcher = try ESPHomeTestClient(port: port)
        watcher.send(type: MessageType.helloRequest, ESPHomeTestClient.hello())
        #expect(watcher.receive()?.type == MessageType.helloResponse)
        watcher.send(type: MessageType.subscribeBluetoothLEAdvertisementsRequest, [0x08, 0x01])
        var client = try ESPHomeTestClient(port: port)
        client.send(type: MessageType.helloRequest, ESPHomeTestClient.hello())
        #expect(client.receive()?.type == MessageType.helloResponse)
        try await AdaptersTests.waitUntil("BlueZ knows the device") {
            try await AdaptersTests.known(e2e, "hci0", "C0:FF:EE:00:00:01")
        }
        var connected = false
        for _ in 0..<5 where !connected {
            connected = connect(&client)
            if !connected { try await Task.sleep(for: .milliseconds(300)) }
        }
        guard connected else {
            watcher.close()
            client.close()
            Issue.record("the Bulk device not connected through the proxy\n\(e2e.gateway.log())")
            throw CancellationError()
        }
        return (watcher, client)
    }

    @Test(
        "400 writes without response (100 KB) all reach the device in order; the other client's advertisements keep coming"
    )
    func writesWithoutResponse() async throws {
        let port = try LoopbackPort.free()
        let config = """
            {
              "mqtt": {"server": "$SERVER", "base_topic": "gattway", "client_id": "gattway-e2e"},
              "bluetooth_proxy": {"enabled": true, "plaintext": true, "listen": "127.0.0.1:\(port)"}
            }
            """
        try await EndToEnd.run(config: config, scenario: try Self.scenario()) { e2e in
            try await AdaptersTests.waitUntil("the proxy's listener") { LoopbackPort.accepts(port) }
            var (watcher, client) = try await Self.watcherAndConnectedClient(e2e, port: port)
            defer {
                watcher.close()
                client.close()
            }
            // ff10 is BlueZ's char000b (the proxy's handles are BlueZ's).
            let chunks = (0..<400).map { index in (0..<244).map { UInt8(truncatingIfNeeded: index &* 13 &+ $0) } }
            let fd = client.fd
            let sending = Task.detached {
                for chunk in chunks {
                    var request = ProtobufWriter()
                    request.varint(1, Self.device)
                    request.uint32(2, 0x0B)
                    request.bytes(4, chunk)
                    let frame = PlaintextFrameDecoder.encode(
                        ServerMessage(type: MessageType.bluetoothGATTWriteRequest, payload: request.bytes))
                    _ = frame.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                }
            }
            // The watcher's advertisements meanwhile (the beacon every 50 ms): none far apart.
            let address = try #require(BluetoothAddress("C0:FF:EE:00:00:01"))
            let uuid = try #require(BluetoothUUID("ff10"))
            var longestGap: UInt64 = 0
            var last = EventLoop.now()
            let deadline = last + 60_000_000_000
            while await e2e.simulator.received(device: address, uuid: uuid).writes < chunks.count,
                EventLoop.now() < deadline
            {
                guard let message = watcher.receive() else { break }
                guard message.type == MessageType.bluetoothLERawAdvertisementsResponse else { continue }
                let now = EventLoop.now()
                longestGap = max(longestGap, now - last)
                last = now
            }
            await sending.value
            let received = await e2e.simulator.received(device: address, uuid: uuid)
            #expect(received.writes == chunks.count && received.bytes == 400 * 244, "\(received)")
            #expect(received.checksum == ReceivedBytes.checksum(of: chunks.flatMap { $0 }), "in order")
            // 100 batches of 4 at one per 7.5 ms: 0.75 s at the link's rate.
            let span = (received.last ?? 0) - (received.first ?? 0)
            #expect(span >= 99 * 0.0075 * 0.95, "the link's rate: \(span) s")
            #expect(longestGap < 1_000_000_000, "advertisements \(Double(longestGap) / 1e6) ms apart at most")
        }
    }
}
