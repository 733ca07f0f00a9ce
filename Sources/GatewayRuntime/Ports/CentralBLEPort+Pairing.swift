import BlueZ
import Bluetooth
import Gateway

/// Pairing through the centrals' pairing agents (docs/config.md, "Pairing"): one agent per
/// adapter's central (bluetoothd asks the agent of the connection that called `Pair`), their
/// questions to the gateway with ids unique over the adapters.
extension CentralBLEPort {
    /// Ids of the questions of adapter `index`: its central's id in the low 32 bits.
    private static func questionID(_ id: Int, adapter index: Int) -> Int { index << 32 | (id & 0xFFFF_FFFF) }

    public func pairingAgent(_ deliver: @escaping @Sendable (BLEPairingEvent) -> Void) async -> PortRegistration {
        let centrals = adapters.centrals
        for (index, central) in centrals.enumerated() {
            await central.startPairingAgent { event in
                switch event {
                case .cancelled(let id): deliver(.cancelled(Self.questionID(id, adapter: index)))
                case .question(let question):
                    let id = question.id
                    deliver(
                        .question(
                            BLEPairingQuestion(
                                id: Self.questionID(id, adapter: index), address: question.address,
                                method: question.method, passkey: question.passkey, service: question.service,
                                pairingHere: question.pairingHere
                            ) { answer in central.onLoop { $0.answerPairing(id, answer) } }))
                }
            }
        }
        return PortRegistration {
            for central in centrals { central.onLoop { $0.stopPairingAgent() } }
        }
    }

    /// Pairs through the adapter that has (or would make) the device's link.
    public func pair(_ address: BluetoothAddress, timeout: Double) async throws(BLEPortError) {
        let central = adapters.central(for: address)
        do {
            try await central.pair(
                await central.peripheral(address), timeout: .milliseconds(Int64(saturating: timeout * 1000)))
        } catch {
            throw Self.portError(error)
        }
    }

    /// Forgets the device on every adapter that knows it (each keeps its own bond).
    public func unpair(_ address: BluetoothAddress) async throws(BLEPortError) {
        do {
            for central in adapters.centrals where await central.isKnown(address) {
                try await central.removeDevice(await central.peripheral(address))
            }
        } catch {
            throw Self.portError(error)
        }
    }
}
