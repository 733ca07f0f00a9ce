import BlueZ
import BluetoothManagement
import EventLoop
import Gateway

/// `bluetooth.radio` at the start of `gattway run`: which path the central's scans read, and one
/// log line saying which and why (docs/config.md, "The radio").
enum RadioSelection {
    /// Opens the management socket for `choice` `auto` or `mgmt` and switches the scans of
    /// `centrals` (one per adapter of `adapters`) to it; nil on the D-Bus path. `mgmt` without a
    /// usable socket is an error (the process does not start); `auto` then falls back to D-Bus.
    /// One socket serves every adapter: each report is read and decoded once and handed to the
    /// centrals, of which only the one of its controller takes it (an integer comparison each).
    static func open(
        _ choice: BluetoothSettings.RadioChoice, adapters: [String], endpoint: ManagementEndpoint,
        centrals: [CentralManager], loop: EventLoop, log: GatewayLogger
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
                deliver: { found in
                    for central in centrals { central.assumeLoopIsolated { $0.kernelReport(found) } }
                },
                closed: {
                    // Not the kernel's socket (it does not end), but a served one whose peer went.
                    log(.warning, "radio: \(endpoint) closed; reading bluetoothd's D-Bus view from now on")
                    for central in centrals { central.assumeLoopIsolated { $0.setReportSource(.bluez) } }
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
        for central in centrals { await central.setReportSource(.kernel, radio: radio) }
        let controllers = (try? await radio.controllers()) ?? []
        let absent = adapters.filter { !controllers.contains(UInt16($0.dropFirst(3)) ?? 0) }
        let present =
            absent.isEmpty
            ? ""
            : " (\(absent.joined(separator: ", ")) \(absent.count == 1 ? "is" : "are") not among its controllers yet)"
        log(
            .notice,
            "radio: \(endpoint), management interface \(version.version).\(version.revision), every report with its bytes\(present)"
        )
        return radio
    }
}
