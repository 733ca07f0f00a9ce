import ESPHomeAPI
import Foundation
import Testing

/// Every message a client may send (api.proto's client and both-ways messages, from
/// Tests/Fixtures/esphome/client-messages.json, made from aioesphomeapi's protobuf classes) gets
/// the answer an ESPHome Bluetooth proxy gives, or its silence — never a client left waiting for
/// an answer that does not come, never a session closed for a message ESPHome ignores. A message
/// type in the fixture that this test does not name fails it: a new request needs a decision.
@Suite("ESPHome API: an answer for every client message", .serialized)
struct RequestCoverageTests {
    struct Fixture: Decodable {
        struct Message: Decodable {
            var id: UInt16
            var name: String
            var payload: String
        }
        var source: String
        var device: UInt64
        var messages: [Message]
    }

    static let fixture: Fixture? = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/esphome/client-messages.json")
        return (try? Data(contentsOf: url)).flatMap { try? JSONDecoder().decode(Fixture.self, from: $0) }
    }()

    /// The message types of the answer, in order, for the messages a proxy answers. The GATT
    /// requests and the connection parameters are sent on a device the client connected first.
    static let answers: [String: [UInt16]] = [
        // The old ConnectRequest: clients before mid-2025 wait for it (no password: empty).
        "AuthenticationRequest": [MessageType.authenticationResponse],
        "DisconnectRequest": [MessageType.disconnectResponse],
        "PingRequest": [MessageType.pingResponse],
        "DeviceInfoRequest": [MessageType.deviceInfoResponse],
        "DeviceCapabilitiesRequest": [MessageType.deviceCapabilitiesResponse],
        "ListEntitiesRequest": [MessageType.listEntitiesDoneResponse],
        // Refused (success false): the key is the config file's.
        "NoiseEncryptionSetKeyRequest": [MessageType.noiseEncryptionSetKeyResponse],
        "SubscribeBluetoothLEAdvertisementsRequest": [MessageType.bluetoothScannerStateResponse],
        "BluetoothScannerSetModeRequest": [MessageType.bluetoothScannerStateResponse],
        "BluetoothDeviceRequest": [MessageType.bluetoothDeviceConnectionResponse],
        "SubscribeBluetoothConnectionsFreeRequest": [MessageType.bluetoothConnectionsFreeResponse],
        "BluetoothGATTGetServicesRequest": [
            MessageType.bluetoothGATTGetServicesResponse, MessageType.bluetoothGATTGetServicesDoneResponse,
        ],
        "BluetoothGATTReadRequest": [MessageType.bluetoothGATTReadResponse],
        "BluetoothGATTWriteRequest": [MessageType.bluetoothGATTWriteResponse],
        // The test's backend refuses the descriptor read with ATT 0x80: an error is an answer too.
        "BluetoothGATTReadDescriptorRequest": [MessageType.bluetoothGATTErrorResponse],
        "BluetoothGATTWriteDescriptorRequest": [MessageType.bluetoothGATTWriteResponse],
        "BluetoothGATTNotifyRequest": [MessageType.bluetoothGATTNotifyResponse],
        // ESP_ERR_NOT_SUPPORTED for a connected device (BlueZ cannot change a live link's
        // parameters), -1 for any other.
        "BluetoothSetConnectionParamsRequest": [MessageType.bluetoothSetConnectionParamsResponse],
    ]

    /// Messages an ESPHome proxy answers with silence: answers to the device's own requests,
    /// subscriptions a proxy without entities has nothing for, and the requests of components a
    /// proxy is built without (an ESPHome build without a component ignores its messages).
    static let silent: Set<String> = [
        "HelloRequest",  // a second one, after the session started
        "PingResponse", "GetTimeResponse", "HomeAssistantStateResponse", "HomeassistantActionResponse",
        "SubscribeStatesRequest", "SubscribeLogsRequest", "SubscribeHomeassistantServicesRequest",
        "SubscribeHomeAssistantStatesRequest", "UnsubscribeBluetoothLEAdvertisementsRequest",
        // Entities: a proxy has none.
        "CoverCommandRequest", "FanCommandRequest", "LightCommandRequest", "SwitchCommandRequest",
        "ClimateCommandRequest", "NumberCommandRequest", "SelectCommandRequest", "SirenCommandRequest",
        "LockCommandRequest", "ButtonCommandRequest", "MediaPlayerCommandRequest", "AlarmControlPanelCommandRequest",
        "TextCommandRequest", "DateCommandRequest", "TimeCommandRequest", "DateTimeCommandRequest",
        "ValveCommandRequest", "UpdateCommandRequest", "WaterHeaterCommandRequest", "ExecuteServiceRequest",
        "CameraImageRequest",
        // Components a Bluetooth proxy is built without.
        "SubscribeVoiceAssistantRequest", "VoiceAssistantResponse", "VoiceAssistantEventResponse",
        "VoiceAssistantAudio", "VoiceAssistantTimerEventResponse", "VoiceAssistantAnnounceRequest",
        "VoiceAssistantConfigurationRequest", "VoiceAssistantSetConfiguration", "ZWaveProxyFrame",
        "ZWaveProxyRequest", "InfraredRFTransmitRawTimingsRequest", "SerialProxyConfigureRequest",
        "SerialProxyWriteRequest", "SerialProxySetModemPinsRequest", "SerialProxyGetModemPinsRequest",
        "SerialProxyRequest", "SerialProxySetModeRequest", "SubscribeSerialProxyIdentityRequest",
        "DeviceWizardRequest", "WizardInputSetRequest", "SendspinPairingTokenRequest", "GetYamlRequest",
    ]

    /// The session ends without an answer (the client acknowledged a disconnect).
    static let endsSession: Set<String> = ["DisconnectResponse"]

    static let needsConnection: Set<String> = [
        "BluetoothGATTGetServicesRequest", "BluetoothGATTReadRequest", "BluetoothGATTWriteRequest",
        "BluetoothGATTReadDescriptorRequest", "BluetoothGATTWriteDescriptorRequest", "BluetoothGATTNotifyRequest",
        "BluetoothSetConnectionParamsRequest",
    ]

    @Test func everyClientMessageIsAnsweredOrIgnoredAsESPHomeDoes() async throws {
        let fixture = try #require(Self.fixture, "Tests/Fixtures/esphome/client-messages.json")
        #expect(fixture.messages.count >= 70, "\(fixture.messages.count) client messages in \(fixture.source)")
        let harness = try await APIServerTests.Harness(connectionSlots: 2) {
            ProxyConnectionTests.FakeBackend(loop: $0)
        }
        let connect = try #require(fixture.messages.first { $0.name == "BluetoothDeviceRequest" })
        for message in fixture.messages {
            let decided =
                Self.answers[message.name] != nil || Self.silent.contains(message.name)
                || Self.endsSession.contains(message.name)
            #expect(decided, "\(message.name) (\(message.id)): no answer decided for this client message")
            guard decided else { continue }
            // The previous client's connection to the device is released once the server saw it
            // leave (a later turn of its loop): wait for that, or this client's connect is refused.
            for _ in 0..<500 where await harness.statistics().clients > 0 {
                try await Task.sleep(for: .milliseconds(10))
            }
            var client = try APIServerTests.TestClient(port: await harness.port)
            defer { client.close() }
            client = try ProxyConnectionTests.connected(&client)
            if Self.needsConnection.contains(message.name) {
                client.send(type: connect.id, NoiseTests.hex(connect.payload))
                let connected = ServerMessage.deviceConnection(
                    address: fixture.device, connected: true, mtu: 247, error: 0)
                ProxyConnectionTests.expectNext(&client, connected, "\(message.name): the device connected first")
            }
            client.send(type: message.id, NoiseTests.hex(message.payload))
            for expected in Self.answers[message.name] ?? [] {
                let received = client.receive()
                #expect(received?.type == expected, "\(message.name): answered with \(String(describing: received))")
            }
            if message.name == "DisconnectRequest" || Self.endsSession.contains(message.name) {
                #expect(client.receive() == nil, "\(message.name): the session ends")
                continue
            }
            // Nothing else came, and the session goes on: the next answer is the ping's.
            client.send(type: MessageType.pingRequest)
            let next = client.receive()
            #expect(next?.type == MessageType.pingResponse, "\(message.name): then \(String(describing: next))")
        }
        let statistics = await harness.statistics()
        #expect(statistics.protocolErrors == 0)
        await harness.stop()
    }

    /// The answers' contents that a client acts on.
    @Test func answersSayWhatGattwayDoes() async throws {
        let harness = try await APIServerTests.Harness(connectionSlots: 2) {
            ProxyConnectionTests.FakeBackend(loop: $0)
        }
        var client = try APIServerTests.TestClient(port: await harness.port)
        client = try ProxyConnectionTests.connected(&client)
        // A new key is refused: success false (an empty message).
        var key = ProtobufWriter()
        key.bytes(1, [UInt8](repeating: 7, count: 32))
        client.send(type: MessageType.noiseEncryptionSetKeyRequest, key.bytes)
        ProxyConnectionTests.expectNext(&client, .noiseEncryptionSetKeyResponse(success: false), "key refused")
        // Connection parameters: -1 for a device not connected, the backend's answer for one that is.
        let device: UInt64 = 0xA4C1_3800_0031
        var params = ProtobufWriter()
        params.varint(1, device)
        params.uint32(2, 6)
        params.uint32(3, 12)
        params.uint32(5, 500)
        client.send(type: MessageType.bluetoothSetConnectionParamsRequest, params.bytes)
        ProxyConnectionTests.expectNext(&client, .connectionParams(address: device, error: -1), "not connected")
        client.send(type: MessageType.bluetoothDeviceRequest, ProxyConnectionTests.deviceRequest(device, 4))
        ProxyConnectionTests.expectNext(
            &client, .deviceConnection(address: device, connected: true, mtu: 247, error: 0), "connected")
        client.send(type: MessageType.bluetoothSetConnectionParamsRequest, params.bytes)
        ProxyConnectionTests.expectNext(&client, .connectionParams(address: device, error: 0), "the backend's answer")
        client.close()
        // A password is never accepted: invalid_password, and the session ends.
        var other = try APIServerTests.TestClient(port: await harness.port)
        other = try ProxyConnectionTests.connected(&other)
        var password = ProtobufWriter()
        password.string(1, "hunter2")
        other.send(type: MessageType.authenticationRequest, password.bytes)
        ProxyConnectionTests.expectNext(&other, .authenticationResponse(invalidPassword: true), "invalid password")
        #expect(other.receive() == nil, "closed after a refused password")
        #expect(await harness.statistics().passwordsRefused == 1)
        #expect(
            harness.lines.withLock { lines in lines.contains { $0.contains("sent a password; gattway has none") } })
        other.close()
        await harness.stop()
    }
}
