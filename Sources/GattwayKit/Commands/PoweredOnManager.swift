import BlueZ
import EventLoop
import JSON

/// What the ad-hoc commands need of a BlueZ manager (the central's and the peripheral's alike)
/// to start one and wait for its adapter.
protocol PoweredOnManager: Actor {
    var state: CentralState { get }
    func waitUntilPoweredOn(timeout: Duration) async throws
    func close() async
}

extension CentralManager: PoweredOnManager {}
extension PeripheralManager: PoweredOnManager {}

/// Starts a manager on a new loop and waits (up to `timeout` seconds) until it is powered on.
/// On failure the manager is closed, the loop shut down, and a ``CLIError/failure(_:)`` says why.
func startPoweredOn<Manager: PoweredOnManager>(
    loopName: String, timeout: Double, _ start: (EventLoop) async throws -> Manager
) async throws -> (EventLoop, Manager) {
    let loop = EventLoop(name: loopName)
    do {
        let manager = try await start(loop)
        do {
            try await manager.waitUntilPoweredOn(timeout: .nanoseconds(Int64(saturating: timeout * 1e9)))
        } catch {
            let state = await manager.state
            await manager.close()
            throw CLIError.failure("Bluetooth is not ready (state \(state)): \(error)")
        }
        return (loop, manager)
    } catch let error as CLIError {
        loop.shutdown()
        throw error
    } catch {
        loop.shutdown()
        throw CLIError.failure("\(error)")
    }
}
