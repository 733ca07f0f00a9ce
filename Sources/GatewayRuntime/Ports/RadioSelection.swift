import BlueZ
import BluetoothManagement
import EventLoop
import Gateway

/// `bluetooth.radio` at the start of `gattway run`: which path the central's scans read, and one
/// log line saying which and why (docs/config.md, "The radio").
enum RadioSelection {
    /// Opens the management socket for `choice` `auto` or `mgmt` and switches `central`'s scans
    /// to it; nil on the D-Bus path. `mgmt` without a usable socket is an error (the process
    /// does not start); `auto` then falls back to D-Bus.
    static func open(
        _ choice: BluetoothSettings.RadioChoice, adapter: String, endpoint: ManagementEndpoint,
        central: CentralManager, loop: EventLoop, log: GatewayLogger
    ) async throws -> KernelRadio? {
        if choice == .dbus {
            log(.notice, "radio: bluetoothd's D-Bus view (bluetooth.radio is dbus)")
            return nil
        }
        let radio: KernelRadio
        let version: ManagementVersion
        do {
            radio = try await KernelRadio.open(
                endpoint, loop: loop,
                deliver: { [central] found in central.assumeLoopIsolated { $0.kernelReport(found) } },
                closed: { [central] in
                    // Not the kernel's socket (it does not end), but a served one whose peer went.
                    log(.warning, "radio: \(endpoint) closed; reading bluetoothd's D-Bus view from now on")
                    central.assumeLoopIsolated { $0.setReportSource(.bluez) }
                })
            do {
                version = try await radio.version()
            } catch {
                await radio.close()
                throw KernelRadioError("\(endpoint) does not answer: \(error)")
            }
        } catch {
            if choice == .mgmt {
                throw RunFailure(
                    "bluetooth.radio is mgmt, but \(error) (set \"radio\": \"auto\" or \"dbus\" to use bluetoothd's D-Bus view)",
                    isConfiguration: false)
            }
            log(.notice, "radio: bluetoothd's D-Bus view, because \(error)")
            return nil
        }
        await central.setReportSource(.kernel, radio: radio)
        let controllers = (try? await radio.controllers()) ?? []
        let index = UInt16(adapter.dropFirst(3)) ?? 0
        let present = controllers.contains(index) ? "" : " (\(adapter) is not among its controllers yet)"
        log(
            .notice,
            "radio: \(endpoint), management interface \(version.version).\(version.revision), every report with its bytes\(present)"
        )
        return radio
    }
}
