import EventLoop
import Gateway
import HTTPServer
import Synchronization

/// The web server as a service of `gattway run` (with `web.enabled`, the default; docs/web.md):
/// it starts after the core, whose state it serves, and stops before it. A server that cannot
/// listen (the port is taken) is logged as an error and the gateway runs on without it: the web
/// server is a window onto the gateway, not part of what it does.
public final class WebService: Service {
    public let name = "web server"
    let config: GatewayConfig
    let loop: EventLoop
    let log: GatewayLogger
    let core: CoreService
    let mqtt: MQTTService
    /// Its counters, in `bridge/health` (`web`) and `/metrics`.
    public let counters: WebCounters
    private let site = Mutex<WebSite?>(nil)

    /// The last log lines, for the page (nil: none kept).
    let logTail: LogTail?
    /// The configuration file, which the page checks again on request.
    let configPath: String?
    /// The Bluetooth proxy (when enabled), for the page's proxy view.
    let proxy: BluetoothProxyService?

    public init(
        config: GatewayConfig, loop: EventLoop, log: GatewayLogger, core: CoreService, mqtt: MQTTService,
        counters: WebCounters, logTail: LogTail? = nil, configPath: String? = nil, proxy: BluetoothProxyService? = nil
    ) {
        self.proxy = proxy
        self.logTail = logTail
        self.configPath = configPath
        self.config = config
        self.loop = loop
        self.log = log
        self.core = core
        self.mqtt = mqtt
        self.counters = counters
    }

    public func start() async throws {
        guard let gateway = core.gateway else {
            throw RunFailure("the web server started before the gateway core", isConfiguration: false)
        }
        let (config, loop, log, counters, client) = (self.config, self.loop, self.log, self.counters, mqtt.client)
        let (logTail, configPath, proxy) = (self.logTail, self.configPath, self.proxy)
        let made: WebSite? = try await loop.submit {
            let site = WebSite(config: config, loop: loop, log: log, counters: counters, gateway: gateway, mqtt: client)
            site.logTail = logTail
            site.configPath = configPath
            if let proxy { site.proxyServer = { proxy.server } }
            do {
                try site.start()
                return site
            } catch {
                log(.error, "web: \(error); the gateway runs without its web server")
                return nil
            }
        }
        site.withLock { $0 = made }
    }

    public func stop(within deadline: StopDeadline) async -> String? {
        guard let site = site.withLock({ $0 }) else { return nil }
        _ = try? await loop.submit { site.stop() }
        return nil
    }
}
