import BlueZSimulator
import DBus
import Foundation
import Testing

/// `Device1.Pair` and `CancelPairing` as bluetoothd 5.66 answers them for LE Just Works pairing
/// without an agent, and `Adapter1.RemoveDevice` forgetting the pairing.
@Suite("Simulator: Pair, CancelPairing, RemoveDevice of a paired device")
struct SimulatorPairingTests {
    static func scenario(pairing: String) -> String {
        """
        {
          \(TestScenarios.timing),
          "devices": [
            {"address": "A4:C1:38:00:00:01", "name": "Lock", "interval": "20ms", "service_uuids": ["180F"],
             "pairing": "\(pairing)",
             "gatt": [{"uuid": "180F", "characteristics": [{"uuid": "2A19", "flags": ["read"], "value": {"hex": "50"}}]}]}
          ]
        }
        """
    }

    static let device = TestScenarios.battery

    func found(_ client: Client) async throws -> SignalLog {
        let log = try await client.signals()
        try await client.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
        try await log.wait(for: "device found") { $0.isInterfacesAdded(Self.device) }
        return log
    }

    @Test(
        "Just Works: refused while not connected; connected: {Bonded, Paired} true, then the reply; AlreadyExists after; RemoveDevice forgets the pairing"
    )
    func justWorks() async throws {
        try await SimulatorHarness.run(Self.scenario(pairing: "just_works")) { harness in
            let client = try await harness.client()
            let log = try await found(client)
            await #expect { try await client.call(Self.device, Client.device, "Pair") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.ConnectionAttemptFailed", "Page Timeout")
            }
            await #expect { try await client.call(Self.device, Client.device, "CancelPairing") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.DoesNotExist", "Does Not Exist")
            }
            try await client.call(Self.device, Client.device, "Connect")
            #expect(try await client.get(Self.device, Client.device, "Paired")?.bool == false)
            try await client.call(Self.device, Client.device, "Pair")
            #expect(try await client.get(Self.device, Client.device, "Paired")?.bool == true)
            #expect(try await client.get(Self.device, Client.device, "Bonded")?.bool == true)
            let signal = try await log.wait(for: "Paired") {
                $0.isPropertiesChanged(Self.device, Client.device) && $0.changed["Paired"] != nil
            }
            #expect(
                signal.changed["Paired"]?.unwrapped.bool == true && signal.changed["Bonded"]?.unwrapped.bool == true)
            await #expect { try await client.call(Self.device, Client.device, "Pair") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.AlreadyExists", "Already Exists")
            }
            // Forgotten: disconnected, removed; seen again it is a new, unpaired device.
            try await client.call(
                "/org/bluez/hci0", Client.adapter, "RemoveDevice", [.objectPath(try DBusObjectPath(Self.device))])
            try await log.wait(for: "removed") {
                $0.member == "InterfacesRemoved" && $0.arguments.first?.objectPath?.rawValue == Self.device
            }
            try await eventually("seen again") {
                log.all.filter { $0.isInterfacesAdded(Self.device) }.count >= 2
            }
            #expect(try await client.get(Self.device, Client.device, "Paired")?.bool == false)
            #expect(try await client.get(Self.device, Client.device, "Connected")?.bool == false)
        }
    }

    @Test("a peer that refuses: AuthenticationFailed, and the device stays unpaired and connected")
    func rejected() async throws {
        try await SimulatorHarness.run(Self.scenario(pairing: "reject")) { harness in
            let client = try await harness.client()
            _ = try await found(client)
            try await client.call(Self.device, Client.device, "Connect")
            await #expect { try await client.call(Self.device, Client.device, "Pair") } throws: {
                ($0 as? DBusError) == DBusError("org.bluez.Error.AuthenticationFailed", "Authentication Failed")
            }
            #expect(try await client.get(Self.device, Client.device, "Paired")?.bool == false)
            #expect(try await client.get(Self.device, Client.device, "Connected")?.bool == true)
        }
    }

    @Test("a scenario's pairing must be just_works, reject, passkey_entry or numeric_comparison")
    func pairingKey() throws {
        #expect(throws: (any Error).self) { try Scenario.parse(Data(Self.scenario(pairing: "passkey").utf8)) }
        #expect(try Scenario.parse(Data(Self.scenario(pairing: "reject").utf8)).devices.first?.pairing == .reject)
        let entry = try Scenario.parse(Data(Self.scenario(pairing: "passkey_entry").utf8)).devices.first
        #expect(entry?.pairing == .passkeyEntry)
        #expect(entry?.pairingPasskey == 123_456, "the default passkey")
        #expect(
            try Scenario.parse(Data(Self.scenario(pairing: "numeric_comparison").utf8)).devices.first?.pairing
                == .numericComparison)
    }
}
