import BlueZ
import BluetoothManagement
import EventLoop
import Gateway

/// `gattway doctor`'s radio line: which path `gattway run` will read advertising reports from
/// (`bluetooth.radio`, docs/config.md "The radio") and how to get the other. Opens the
/// management socket as `run` would, asks its version and controllers (read-only), closes it.
struct RadioDiagnosis {
    let choice: BluetoothSettings.RadioChoice
    let adapter: String
    let endpoint: ManagementEndpoint
    let timeout: Duration
    let loop: EventLoop

    static let toKernel =
        "for every report with its bytes, run as root or give the service CAP_NET_ADMIN (deploy/gattway.service has it) and set \"radio\": \"auto\""

    func run() async -> [DoctorCheck] {
        if choice == .dbus {
            return [.ok("radio", "run reads bluetoothd's D-Bus view (bluetooth.radio is dbus); \(Self.toKernel)")]
        }
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        do {
            let radio = try await KernelRadio.open(endpoint, loop: loop) { _ in }
            defer { Task { await radio.close() } }
            let version = try await radio.version(timeout: seconds)
            let controllers = try await radio.controllers(timeout: seconds)
            let names = controllers.map { "hci\($0)" }
            let found =
                "run reads \(endpoint) (management interface \(version.version).\(version.revision), controllers \(names.isEmpty ? "none" : names.joined(separator: ", "))): every report with its bytes"
            if let index = UInt16(adapter.dropFirst(3)), !controllers.contains(index) {
                return [.warn("radio", found + "; \(adapter) is not among them", "check bluetooth.adapter")]
            }
            return [.ok("radio", found + "; \"radio\": \"dbus\" reads bluetoothd's D-Bus view instead")]
        } catch {
            if choice == .mgmt {
                return [
                    .fail(
                        "radio", "bluetooth.radio is mgmt, but \(error): run will not start",
                        "give the service CAP_NET_ADMIN, or set \"radio\": \"auto\" or \"dbus\"")
                ]
            }
            return [.warn("radio", "run falls back to bluetoothd's D-Bus view, because \(error)", Self.toKernel)]
        }
    }
}
