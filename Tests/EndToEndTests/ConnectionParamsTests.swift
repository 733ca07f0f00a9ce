import BlueZSimulator
import ESPHomeAPI
import Foundation
import GatewayFakes
import Subprocess
import TestSupport
import Testing

/// Connection parameters through `gattway run` and the simulator's management socket (which
/// takes Load Connection Parameters as kernel 6.1 does, and whose links use what was loaded for
/// their device): what the controller gives the link, as a user would see it in btmon.
@Suite("End to end: connection parameters")
struct ConnectionParamsTests {
    static let battery = "A4:C1:38:00:00:01"

    /// The simulated link's interval (1.25 ms units), latency and timeout (10 ms units), once the
    /// device is connected.
    static func link(_ e2e: EndToEnd, _ address: String = battery) async throws -> [UInt16] {
        var found: [UInt16] = []
        try await AdaptersTests.waitUntil("the link to \(address)") {
            guard let link = try? await e2e.simulator.linkParameters(address: address) else { return false }
            found = [link.interval, link.latency, link.supervisionTimeout]
            return true
        }
        return found
    }

    @Test(
        "a rule's connection_params reach the link on the management path (interval 15 ms, latency 2, 4 s) and the connected line names them; on the D-Bus path the link has the kernel's defaults and the log says why",
        arguments: ["mgmt", "dbus"])
    func ruleParameters(radio: String) async throws {
        let config = """
            {
              "mqtt": {"server": "$SERVER", "base_topic": "gattway"},
              "bluetooth": {"radio": "\(radio)"},
              "devices": [{"match": {"address": "\(Self.battery)"}, "name": "battery", "connect": true,
                           "connection_params": {"min_interval_ms": 7.5, "max_interval_ms": 15, "latency": 2,
                                                 "supervision_timeout_ms": 4000}}]
            }
            """
        try await EndToEnd.run(config: config, scenario: try EndToEnd.fastDemo(), managementSocket: true) { e2e in
            let link = try await Self.link(e2e)
            try await AdaptersTests.waitUntil("the connected line") { e2e.gateway.log().contains("battery: connected") }
            let log = e2e.gateway.log()
            if radio == "mgmt" {
                #expect(link == [12, 2, 400], "\(log)")
                #expect(
                    log.contains(
                        "battery: connected (connection_params asked for: interval 7.5–15 ms, latency 2, supervision timeout 4000 ms)"
                    ), "\(log)")
            } else {
                #expect(link == [40, 0, 42], "the kernel's defaults: 50 ms, latency 0, 420 ms")
                #expect(log.contains("battery: connection_params not applied"), "\(log)")
            }
        }
    }

    /// A proxy client's BluetoothSetConnectionParamsRequest, as ESPHome answers it: only the
    /// link's owner; invalid values refused; valid ones loaded for the next connect (the live link
    /// keeps its parameters, as on kernel 6.1) and answered ESP_ERR_NOT_SUPPORTED.
    @Test(
        "a proxy client's SetConnectionParams: -1 for another client, 0x102 for invalid values, 0x106 for valid ones, which the device's next connect through the proxy uses"
    )
    func proxyParameters() async throws {
        let port = try LoopbackPort.free()
        let config = """
            {
              "mqtt": {"server": "$SERVER", "base_topic": "gattway", "client_id": "gattway-e2e"},
              "bluetooth": {"radio": "mgmt"},
              "bluetooth_proxy": {"enabled": true, "plaintext": true, "listen": "127.0.0.1:\(port)"}
            }
            """
        let device: UInt64 = 0xA4C1_3800_0001
        func params(_ values: [UInt32]) -> [UInt8] {
            var writer = ProtobufWriter()
            writer.varint(1, device)
            for (index, value) in values.enumerated() { writer.uint32(UInt32(index + 2), value) }
            return writer.bytes
        }
        try await EndToEnd.run(config: config, scenario: try EndToEnd.fastDemo(), managementSocket: true) { e2e in
            try await AdaptersTests.waitUntil("the proxy's listener") { LoopbackPort.accepts(port) }
            try await AdaptersTests.waitUntil("bluetoothd knows the battery sensor") {
                try await AdaptersTests.known(e2e, "hci0", Self.battery)
            }
            var owner = try Self.client(port)
            var other = try Self.client(port)
            defer {
                owner.close()
                other.close()
            }
            try Self.connect(&owner, device)
            #expect(try await Self.link(e2e) == [40, 0, 42], "connected with the kernel's defaults")

            other.send(type: MessageType.bluetoothSetConnectionParamsRequest, params([6, 12, 0, 400]))
            #expect(try Self.answer(&other) == -1, "another client's link")
            owner.send(type: MessageType.bluetoothSetConnectionParamsRequest, params([6, 80, 0, 20]))
            #expect(try Self.answer(&owner) == 0x102, "a timeout of 200 ms, not longer than (1 + 0) × 100 ms × 2")
            owner.send(type: MessageType.bluetoothSetConnectionParamsRequest, params([12, 6, 0, 400]))
            #expect(try Self.answer(&owner) == 0x102, "min above max")
            owner.send(type: MessageType.bluetoothSetConnectionParamsRequest, params([6, 12, 0, 400]))
            #expect(try Self.answer(&owner) == 0x106, "loaded for the next connect, not applied to the live link")
            #expect(try await Self.link(e2e) == [40, 0, 42], "the live link keeps its parameters")

            // Disconnect through the proxy and connect again: the new link uses them.
            var disconnect = ProtobufWriter()
            disconnect.varint(1, device)
            disconnect.uint32(2, 1)
            owner.send(type: MessageType.bluetoothDeviceRequest, disconnect.bytes)
            try await AdaptersTests.waitUntil("the link is down") {
                (try? await e2e.simulator.linkParameters(address: Self.battery)) == nil
            }
            try Self.connect(&owner, device)
            #expect(try await Self.link(e2e) == [12, 0, 400], "\(e2e.gateway.log())")
        }
    }

    static func client(_ port: UInt16) throws -> ESPHomeTestClient {
        var client = try ESPHomeTestClient(port: port)
        client.send(type: MessageType.helloRequest, ESPHomeTestClient.hello())
        guard client.receive()?.type == MessageType.helloResponse else { throw ProxyTestFailure("no hello") }
        return client
    }

    /// Connects (V3 without cache, a public address) and waits for the answer; tried again when
    /// refused, as Home Assistant does.
    static func connect(_ client: inout ESPHomeTestClient, _ device: UInt64) throws {
        for _ in 0..<5 {
            var request = ProtobufWriter()
            request.varint(1, device)
            request.uint32(2, 5)
            request.bool(3, true)
            client.send(type: MessageType.bluetoothDeviceRequest, request.bytes)
            while let message = client.receive() {
                guard message.type == MessageType.bluetoothDeviceConnectionResponse else { continue }
                var reader = ProtobufReader(message.payload)
                while let (field, value) = try reader.next() {
                    if field == 2, try value.bool(field: field) { return }
                }
                break
            }
            Thread.sleep(forTimeInterval: 0.3)
        }
        throw ProxyTestFailure("could not connect \(String(device, radix: 16)) through the proxy")
    }

    /// The `error` of the next BluetoothSetConnectionParamsResponse.
    static func answer(_ client: inout ESPHomeTestClient) throws -> Int64 {
        while let message = client.receive() {
            guard message.type == MessageType.bluetoothSetConnectionParamsResponse else { continue }
            var reader = ProtobufReader(message.payload)
            var error: Int64 = 0
            while let (field, value) = try reader.next() {
                if field == 2 { error = Int64(Int32(truncatingIfNeeded: try value.varint(field: field))) }
            }
            return error
        }
        throw ProxyTestFailure("no BluetoothSetConnectionParamsResponse")
    }
}

private struct ProxyTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
