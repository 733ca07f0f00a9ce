import Bluetooth
import ESPHomeAPI
import Foundation
import GatewayFakes
import Testing

/// gattway's protobuf encoder and decoder against messages encoded by the protobuf classes
/// aioesphomeapi ships (Tests/Fixtures/esphome/make_message_vectors.py): server messages byte for
/// byte, client messages by their decoded fields.
@Suite("ESPHome API messages against aioesphomeapi's protobuf")
struct MessageVectorTests {
    struct Vectors: Decodable {
        var server: [String: String]
        var client: [String: String]
    }

    static let vectors: Vectors? = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/esphome/message-vectors.json")
        return (try? Data(contentsOf: url)).flatMap { try? JSONDecoder().decode(Vectors.self, from: $0) }
    }()

    static func server(_ name: String) throws -> [UInt8] {
        NoiseTests.hex(try #require(vectors?.server[name], "no vector \(name)"))
    }

    static func client(_ name: String) throws -> [UInt8] {
        NoiseTests.hex(try #require(vectors?.client[name], "no vector \(name)"))
    }

    static let device: UInt64 = 0xA4C1_3800_0001
    static let uart = BluetoothUUID(high: 0x6E40_0001_B5A3_F393, low: 0xE0A9_E50E_24DC_CA9E)
    static let uartRX = BluetoothUUID(high: 0x6E40_0001_B5A3_F393, low: 0xE0A9_E50E_24DC_CA9F)

    @Test func sessionMessagesMatch() throws {
        #expect(
            ServerMessage.helloResponse(major: 1, minor: 14, serverInfo: "gattway 1.2.3", name: "pi-proxy").payload
                == (try Self.server("hello_response")))
        let info = ServerMessage.DeviceInfo(
            name: "pi-proxy", friendlyName: "Pi Proxy", macAddress: "AA:BB:CC:DD:EE:FF",
            bluetoothMacAddress: "AA:BB:CC:DD:EE:FF", esphomeVersion: "2025.8.0", compilationTime: "Dec  2 2026",
            model: "gattway", manufacturer: "gattway", projectName: "gattway.gattway", projectVersion: "1.2.3",
            bluetoothProxyFeatures: [.passiveScan, .rawAdvertisements, .stateAndMode], apiEncryptionSupported: true)
        #expect(ServerMessage.deviceInfoResponse(info).payload == (try Self.server("device_info_response")))
    }

    @Test func bluetoothMessagesMatch() throws {
        let advertisements = ServerMessage.rawAdvertisements([
            .init(
                address: 0xC4D3_8C12_4A5F, rssi: -72, addressType: 1, data: [0x02, 0x01, 0x06, 0x1A, 0xFF, 0x99, 0x04]),
            .init(address: 0xA4C1_3800_0004, rssi: -6, addressType: 0, data: [0x04, 0x16, 0xD2, 0xFC, 0x40]),
        ])
        #expect(advertisements.payload == (try Self.server("raw_advertisements")))
        #expect(
            ServerMessage.connectionsFree(free: 2, limit: 3, allocated: [Self.device]).payload
                == (try Self.server("connections_free")))
        #expect(
            ServerMessage.scannerState(.running, mode: .active, configuredMode: .active).payload
                == (try Self.server("scanner_state")))
        #expect(
            ServerMessage.deviceConnection(address: Self.device, connected: false, mtu: 0, error: 0x85).payload
                == (try Self.server("device_connection")))
    }

    @Test func gattMessagesMatch() throws {
        // The battery service at handles 10, 11 and 13, then a UART service.
        let services =
            ProxyGATTFixture.batteryService + [
                GATTServiceInfo(
                    uuid: Self.uart, handle: 20,
                    characteristics: [
                        GATTCharacteristicInfo(uuid: Self.uartRX, handle: 21, properties: 0x0C, descriptors: [])
                    ])
            ]
        #expect(
            ServerMessage.gattServices(address: Self.device, services: services, shortUUIDs: true).payload
                == (try Self.server("gatt_services_short")))
        #expect(
            ServerMessage.gattServices(address: Self.device, services: services, shortUUIDs: false).payload
                == (try Self.server("gatt_services_long")))
        #expect(
            ServerMessage.gattRead(address: Self.device, handle: 11, data: [0x5D]).payload
                == (try Self.server("gatt_read")))
        #expect(
            ServerMessage.gattError(address: Self.device, handle: 11, error: -1).payload
                == (try Self.server("gatt_error")))
        #expect(
            ServerMessage.gattNotifyData(address: Self.device, handle: 11, data: [1, 2]).payload
                == (try Self.server("gatt_notify_data")))
    }

    @Test func pairingAndCacheMessagesMatch() throws {
        let paired = ServerMessage.devicePairing(address: Self.device, paired: true, error: 0)
        #expect(paired.type == 85)
        #expect(paired.payload == (try Self.server("device_pairing")))
        #expect(
            ServerMessage.devicePairing(address: Self.device, paired: false, error: -1).payload
                == (try Self.server("device_pairing_failed")))
        let unpaired = ServerMessage.deviceUnpairing(address: Self.device, success: true, error: 0)
        #expect(unpaired.type == 86)
        #expect(unpaired.payload == (try Self.server("device_unpairing")))
        let refused = ServerMessage.deviceClearCache(address: Self.device, success: false, error: 0x82)
        #expect(refused.type == 88)
        #expect(refused.payload == (try Self.server("device_clear_cache_refused")))
    }

    @Test func clientMessagesDecode() throws {
        func decode(_ type: UInt16, _ name: String) throws -> ClientMessage {
            try ClientMessage.decode(type: type, payload: try Self.client(name)[...])
        }
        #expect(
            try decode(MessageType.helloRequest, "hello_request")
                == .hello(clientInfo: "Home Assistant 2026.11", apiVersionMajor: 1, apiVersionMinor: 15))
        #expect(
            try decode(MessageType.subscribeBluetoothLEAdvertisementsRequest, "subscribe_raw")
                == .subscribeBluetoothLEAdvertisements(flags: 1))
        #expect(
            try decode(MessageType.bluetoothDeviceRequest, "device_request")
                == .bluetoothDeviceRequest(address: Self.device, requestType: 4, addressType: 1))
        #expect(
            try decode(MessageType.bluetoothDeviceRequest, "device_request_v1")
                == .bluetoothDeviceRequest(address: Self.device, requestType: 0, addressType: 1))
        // No has_address_type: no address type (ESPHome refuses such a connect).
        #expect(
            try decode(MessageType.bluetoothDeviceRequest, "device_request_no_type")
                == .bluetoothDeviceRequest(address: Self.device, requestType: 5, addressType: nil))
        #expect(
            try decode(MessageType.bluetoothDeviceRequest, "device_request_pair")
                == .bluetoothDeviceRequest(address: Self.device, requestType: 2, addressType: nil))
        #expect(
            try decode(MessageType.bluetoothDeviceRequest, "device_request_clear_cache")
                == .bluetoothDeviceRequest(address: Self.device, requestType: 6, addressType: nil))
        #expect(
            try decode(MessageType.getTimeResponse, "get_time_response")
                == .getTimeResponse(epochSeconds: 1_795_000_000))
        #expect(
            try decode(MessageType.bluetoothGATTGetServicesRequest, "gatt_get_services")
                == .gatt(.getServices(address: Self.device)))
        #expect(
            try decode(MessageType.bluetoothGATTReadRequest, "gatt_read")
                == .gatt(.read(address: Self.device, handle: 11)))
        #expect(
            try decode(MessageType.bluetoothGATTWriteRequest, "gatt_write")
                == .gatt(.write(address: Self.device, handle: 21, withResponse: true, data: Array("hi".utf8))))
        #expect(
            try decode(MessageType.bluetoothGATTWriteDescriptorRequest, "gatt_write_descriptor")
                == .gatt(.writeDescriptor(address: Self.device, handle: 13, data: [1, 0])))
        #expect(
            try decode(MessageType.bluetoothGATTNotifyRequest, "gatt_notify")
                == .gatt(.notify(address: Self.device, handle: 11, enable: true)))
        // A handle beyond ATT's 16 bits is refused.
        #expect(throws: ProtobufError.valueOutOfRange(field: 2)) {
            _ = try ClientMessage.decode(type: MessageType.bluetoothGATTReadRequest, payload: [0x10, 0x80, 0x80, 0x04])
        }
    }
}
