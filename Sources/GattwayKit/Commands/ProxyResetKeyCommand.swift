import ESPHomeAPI
import Gateway
import LocalSystem

/// `gattway proxy reset-key`: forgets the encryption key a client (Home Assistant) set on the
/// Bluetooth proxy (keyless adoption, `bluetooth_proxy.provisioning`): `esphome-api.key` in the
/// state directory is removed; a running gattway is unprovisioned from its next client on.
struct ProxyResetKeyCommand: Command {
    static let name = "proxy reset-key"
    static let summary = "Forget the encryption key Home Assistant set on the Bluetooth proxy."
    static let discussion = """
        Removes esphome-api.key from the state directory (--state-dir, else state_directory of the \
        configuration). A running gattway notices at the next client's connection (clients connected \
        with the old key stay until they leave); from then on the proxy is unprovisioned (with \
        bluetooth_proxy.provisioning): it accepts the all-zero key until a client sets a new one. Remove the device from Home Assistant and add it again afterwards. \
        A key in bluetooth_proxy.encryption_key is not touched (it always wins).
        """
    static let options: [Option] = [
        .value("config", "FILE", "The configuration file.", default: "./config.json or /etc/gattway/config.json"),
        .value(
            "state-dir", "DIR", "The state directory (overrides state_directory).", default: "config's state_directory"),
    ]

    let configPath: String
    let stateDirectory: String?

    init(parsing arguments: ParsedArguments) throws {
        configPath = arguments.configPath
        stateDirectory = arguments.value("state-dir")
    }

    func run() async throws -> ExitCode {
        var directory = stateDirectory
        var configured = false
        if directory == nil || LocalFile.exists(configPath) {
            do throws(GatewayConfigError) {
                let config = try GatewayConfig.load(path: configPath)
                directory = directory ?? config.stateDirectory
                configured = config.bluetoothProxy.encryptionKey != nil
            } catch {
                // With --state-dir the configuration is only read for the note below.
                if directory == nil {
                    throw CLIError.config(error.lines.map { "\(configPath): \($0)" }.joined(separator: "\n"))
                }
            }
        }
        guard let directory else {
            throw CLIError.config(
                "\(configPath): no state_directory (and no --state-dir): the proxy keeps no key to forget")
        }
        let store = APIKeyStore(directory: directory)
        do {
            if try store.forget() {
                standardOutput(
                    "\(store.path): removed; the proxy is unprovisioned from the next client's connection on\n")
            } else {
                standardOutput("\(store.path): no stored key (nothing to forget)\n")
            }
        } catch {
            throw CLIError.failure("\(error)")
        }
        if configured {
            standardOutput("note: bluetooth_proxy.encryption_key is set in \(configPath); that key stays in use\n")
        }
        return .success
    }
}
