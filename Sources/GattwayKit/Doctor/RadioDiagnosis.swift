import BlueZ
import BluetoothManagement
import EventLoop
import Gateway
import Synchronization

/// `gattway doctor`'s radio line: which path `gattway run` will read advertising reports from
/// (`bluetooth.radio`, docs/config.md "The radio") and how to get the other. Opens the
/// management socket as `run` would, asks its version and controllers (read-only), counts the
/// reports each adapter delivers for up to a second (a discovery or passive scan must run for
/// any: `run`'s, or another client's), closes it. Each of `bluetooth.adapters` is listed with
/// its path, scan mode and reports per second.
struct RadioDiagnosis {
    let choice: BluetoothSettings.RadioChoice
    let adapters: [String]
    var scanMode: BluetoothSettings.ScanModeChoice = .active
    let endpoint: ManagementEndpoint
    let timeout: Duration
    let loop: EventLoop

    static let toKernel =
        "for every report with its bytes, run as root or give the service CAP_NET_ADMIN (deploy/gattway.service has it) and set \"radio\": \"auto\""

    func run() async -> [DoctorCheck] {
        if choice == .dbus {
            return [
                .ok(
                    "radio",
                    "run reads bluetoothd's D-Bus view (bluetooth.radio is dbus); \(Self.toKernel)\(listing(path: "dbus", rates: nil))"
                )
            ]
        }
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        do {
            let counts = ReportCounts()
            let radio = try await KernelRadio.open(endpoint, loop: loop) { found in counts.add(found.controller) }
            defer { Task { await radio.close() } }
            let version = try await radio.version(timeout: seconds)
            let controllers = try await radio.controllers(timeout: seconds)
            let names = controllers.map { "hci\($0)" }
            let window = min(1, seconds)
            try? await Task.sleep(for: .milliseconds(Int64(window * 1000)))
            let rates = counts.perSecond(over: window)
            let found =
                "run reads \(endpoint) (management interface \(version.version).\(version.revision), controllers \(names.isEmpty ? "none" : names.joined(separator: ", "))): every report with its bytes"
                + listing(path: "mgmt", rates: rates)
            let absent = adapters.filter { UInt16($0.dropFirst(3)).map { !controllers.contains($0) } ?? true }
            if !absent.isEmpty {
                return [
                    .warn(
                        "radio",
                        found
                            + "; \(absent.joined(separator: ", ")) \(absent.count == 1 ? "is" : "are") not among them",
                        "check bluetooth.adapters (a dongle unplugged is scanned again once it is back)")
                ]
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

    /// `; adapters: hci0 (mgmt, scan mode active, 12.0 reports/s), hci1 (…)`.
    func listing(path: String, rates: [UInt16: Double]?) -> String {
        let mode =
            switch (path, scanMode) {
            case ("dbus", .auto): "active (auto is passive only on the management socket)"
            case ("dbus", .passive): "passive, which run refuses without the management socket"
            default: scanMode.rawValue
            }
        let each = adapters.map { name -> String in
            let rate =
                rates.map { rates in
                    let value = UInt16(name.dropFirst(3)).flatMap { rates[$0] } ?? 0
                    return ", \((value * 10).rounded() / 10) reports/s"
                } ?? ", reports/s in bridge/health"
            return "\(name) (\(path), scan mode \(mode)\(rate))"
        }
        return "; adapters: " + each.joined(separator: ", ")
    }

    /// Reports per controller while the diagnosis listens (on the loop thread).
    final class ReportCounts: Sendable {
        private let counts = Mutex<[UInt16: Int]>([:])

        func add(_ controller: UInt16) {
            counts.withLock { counts in
                guard counts[controller] != nil || counts.count < 64 else { return }
                counts[controller, default: 0] += 1
            }
        }

        func perSecond(over seconds: Double) -> [UInt16: Double] {
            counts.withLock { $0.mapValues { seconds > 0 ? Double($0) / seconds : 0 } }
        }
    }
}
