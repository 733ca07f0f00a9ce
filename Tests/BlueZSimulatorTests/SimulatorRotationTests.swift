import BlueZSimulator
import Bluetooth
import DBus
import Foundation
import Gateway
import JSON
import Parsers
import Testing

/// A device with an IRK advertises from resolvable private addresses made from it, a new one
/// every `rpa_rotation`; the gateway's resolver ties each to the IRK.
@Suite("Simulator: a phone rotating its resolvable private address")
struct SimulatorRotationTests {
    /// The Core spec's sample IRK (Vol 3 Part H, Appendix D.7).
    static let irk: [UInt8] = [
        0xec, 0x02, 0x34, 0xa3, 0x57, 0xc8, 0xad, 0x05, 0x34, 0x10, 0x10, 0xa6, 0x0a, 0x39, 0x7d, 0x9b,
    ]
    static let irkText = "ec0234a357c8ad05341010a60a397d9b"

    @Test("the addresses are random, top bits 01, all different, and resolve to the IRK with the resolver")
    func addresses() throws {
        let addresses = (0..<50).compactMap { DeviceSpec.resolvablePrivateAddress(irk: Self.irk, index: $0) }
        #expect(addresses.count == 50 && Set(addresses).count == 50)
        let other = [UInt8](repeating: 7, count: 16)
        let resolver = IdentityResolver(irks: [(0, other), (1, Self.irk)])
        for address in addresses {
            #expect(address.rawValue >> 46 == 0b01, "\(address)")
            #expect(AddressKind(address, type: .random) == .resolvablePrivate)
            #expect(resolver.resolve(address) == 1, "\(address)")
        }
        let stranger = try #require(DeviceSpec.resolvablePrivateAddress(irk: other, index: 0))
        #expect(resolver.resolve(stranger) == 0)
    }

    @Test("scenario keys: irk and rpa_rotation; refused: a bad IRK, an address beside it, a rotation without it")
    func keys() throws {
        let spec = try DeviceSpec.parse(
            Array(#"{"irk": "\#(Self.irkText)", "rpa_rotation": "30s", "name": "Phone"}"#.utf8),
            adapters: ["hci0"], defaultAdapter: "hci0")
        #expect(spec.irk == Self.irk && spec.rpaRotation == 30 && spec.addressType == .random)
        #expect(spec.address == DeviceSpec.resolvablePrivateAddress(irk: Self.irk, index: 0))
        let defaulted = try DeviceSpec.parse(
            Array(#"{"irk": "\#(Self.irkText)"}"#.utf8), adapters: ["hci0"], defaultAdapter: "hci0")
        #expect(defaulted.rpaRotation == 900, "15 minutes, as phones do")
        for bad in [
            #"{"irk": "ec02"}"#, #"{"irk": "\#(Self.irkText)", "address": "A4:C1:38:00:00:01"}"#,
            #"{"address": "A4:C1:38:00:00:01", "rpa_rotation": "30s"}"#,
            #"{"irk": "\#(Self.irkText)", "rpa_rotation": "0s"}"#,
        ] {
            #expect(throws: (any Error).self, "\(bad)") {
                try DeviceSpec.parse(Array(bad.utf8), adapters: ["hci0"], defaultAdapter: "hci0")
            }
        }
    }

    @Test("on the bus: the device's object goes and one at the next address comes, every period")
    func rotation() async throws {
        let scenario = """
            {"devices": [{"irk": "\(Self.irkText)", "rpa_rotation": "2s", "interval": "50ms", "name": "Phone"}]}
            """
        func path(_ index: Int) throws -> String {
            let address = try #require(DeviceSpec.resolvablePrivateAddress(irk: Self.irk, index: UInt32(index)))
            return "/org/bluez/hci0/dev_" + address.description.replacingOccurrences(of: ":", with: "_")
        }
        try await SimulatorHarness.run(scenario) { harness in
            let client = try await harness.client()
            let log = try await client.signals()
            try await client.call("/org/bluez/hci0", Client.adapter, "StartDiscovery")
            // The rotation runs from the scenario's start: on a loaded machine discovery may begin
            // after the first period, so the first address seen may be a later one.
            let candidates = try (0..<30).map(path)
            let added = try await log.wait(for: "an address of the phone found", within: 20) { signal in
                candidates.contains { signal.isInterfacesAdded($0) }
            }
            let first = try #require(candidates.firstIndex { added.isInterfacesAdded($0) })
            var paths = [candidates[first]]
            for index in (first + 1)...(first + 2) {
                let next = try path(index)
                try await log.wait(for: "address \(index) found", within: 10) { $0.isInterfacesAdded(next) }
                paths.append(next)
            }
            let gone = paths[0]
            try await log.wait(for: "the first address gone", within: 10) {
                $0.member == "InterfacesRemoved" && $0.arguments.first?.objectPath?.rawValue == gone
            }
            #expect(try await client.get(paths[2], Client.device, "AddressType")?.string == "random")
            #expect(Set(paths).count == 3)
        }
    }
}
