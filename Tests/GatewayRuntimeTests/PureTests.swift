import BlueZ
import Bluetooth
import BluetoothManagement
import ESPHomeAPI
import Gateway
import MQTT
import Testing

@testable import GatewayRuntime

@Suite("The runtime's pure parts: the proxy's mDNS records, the MQTT client's settings, exit codes")
struct PureTests {
    static func apiConfiguration(_ encryption: APITransport.Encryption) -> APIServerConfiguration {
        APIServerConfiguration(
            host: "0.0.0.0", port: 6053, encryption: encryption, name: "kitchen", friendlyName: "Kitchen Proxy",
            macAddress: "00:AA:01:0B:0C:0D", bluetoothMacAddress: "00:AA:01:0B:0C:0D", version: "1.2.3", maxClients: 4,
            connectionSlots: 3)
    }

    @Test(
        "the announcement's TXT record is what Home Assistant reads of an ESPHome device: mac as 12 lower-case hex digits, names, versions; api_encryption only with a key"
    )
    func txtRecords() {
        let plaintext = AvahiAnnouncer.txt(Self.apiConfiguration(.plaintext))
        #expect(
            plaintext == [
                "friendly_name=Kitchen Proxy", "version=\(APIServer.esphomeVersion)", "mac=00aa010b0c0d",
                "platform=host", "board=gattway", "network=ethernet", "project_name=gattway.gattway",
                "project_version=1.2.3",
            ])
        let noise = AvahiAnnouncer.txt(Self.apiConfiguration(.noise(psk: [UInt8](repeating: 7, count: 32))))
        #expect(noise == plaintext + ["api_encryption=Noise_NNpsk0_25519_ChaChaPoly_SHA256"])
        #expect(AvahiAnnouncer.serviceType == "_esphomelib._tcp")
    }

    @Test(
        "the MQTT client's configuration: bridge/state offline as the last will, retained; MQTT 5 caps inbound packets at 1 MiB"
    )
    func mqttConfiguration() throws {
        let config = try GatewayConfig.parse(
            Array(#"{"mqtt": {"server": "mqtt://broker.local:1884", "base_topic": "home", "protocol": "5"}}"#.utf8))
        let configuration = try MQTTService.configuration(config)
        let will = try #require(configuration.will)
        #expect(will.topic == "home/bridge/state")
        #expect(will.payloadString == #"{"state":"offline"}"#)
        #expect(will.retain)
        #expect(configuration.protocolVersion == .v5)
        #expect(configuration.maximumPacketSize == 1 << 20)
        let v311 = try MQTTService.configuration(
            try GatewayConfig.parse(Array(#"{"mqtt": {"server": "mqtt://broker.local", "protocol": "3.1.1"}}"#.utf8)))
        #expect(v311.protocolVersion == .v311)
    }

    @Test("exit codes: a configuration error is 78, any other failure 1, decided from the error alone")
    func exitCodes() {
        #expect(ExitCode(for: RunFailure("unsupported scheme", isConfiguration: true)) == .config)
        #expect(ExitCode(for: RunFailure("bus gone", isConfiguration: false)) == .failure)
        #expect(ExitCode(for: GatewayStartError("advertisement needs 38 bytes", isConfiguration: true)) == .config)
        #expect(ExitCode(for: GatewayStartError("cannot scan")) == .failure)
        #expect(ExitCode(for: ExitCode.usage) == .usage)
        #expect(ExitCode(for: CancellationError()) == .failure)
    }

    @Test(
        "the proxy forwards a kernel report's own bytes, address type and RSSI; a report of BlueZ's D-Bus view is rebuilt from its properties"
    )
    func rawAdvertisements() {
        let address = BluetoothAddress("C4:7C:8D:6A:00:01")!
        // Flags, then a service data AD whose order and padding a rebuild would not keep.
        let bytes: [UInt8] = [0x02, 0x01, 0x06, 0x05, 0x16, 0xD2, 0xFC, 0x40, 0x01, 0x03, 0xFF, 0xFF, 0xFF]
        let found = DeviceFound(
            controller: 0, address: address, addressType: .leRandom, rssi: -71, flags: 0, data: bytes)
        let kernel = BluetoothProxy.rawAdvertisement(
            ScanResult(
                peripheral: Peripheral(address: address, addressType: .random),
                advertisementData: AdvertisementData(advertisingData: bytes), kernelReport: found))
        #expect(kernel.data == bytes)
        #expect(kernel.addressType == 1)
        #expect(kernel.rssi == -71)
        #expect(kernel.address == address.rawValue)
        let unavailable = BluetoothProxy.rawAdvertisement(
            ScanResult(
                peripheral: Peripheral(address: address), advertisementData: AdvertisementData(),
                kernelReport: DeviceFound(
                    controller: 0, address: address, addressType: .lePublic, rssi: 127, data: bytes)))
        #expect(unavailable.rssi == -127)
        #expect(unavailable.addressType == 0)
        let properties = AdvertisementData(serviceData: [BluetoothUUID(0xFCD2): [0x40, 0x01]], rssi: -70)
        let rebuilt = BluetoothProxy.rawAdvertisement(
            ScanResult(peripheral: Peripheral(address: address, addressType: .public), advertisementData: properties))
        #expect(rebuilt.data == AdvertisementBytes.build(properties))
        #expect(rebuilt.rssi == -70)
    }
}
