import Retry

/// How a ``CentralManager`` behaves; every field has a production default.
public struct CentralOptions: Sendable {
    /// The adapter to use (default: the first adapter, preferring a powered one).
    public var adapter: AdapterSelector
    /// Where scans get their reports: `.bluez`, from `Device1`'s properties (merged per device,
    /// signalled on change); `.kernel`, from ``CentralManager/kernelReport(_:)``, which a
    /// ``KernelRadio`` on the management socket calls for every report (discovery is still
    /// bluetoothd's, started over D-Bus, without a UUID filter: the kernel would apply it to
    /// every management socket, and it ignores service data).
    public var reports: ReportSource = .bluez

    /// Where advertising reports come from (``CentralOptions/reports``).
    public enum ReportSource: Sendable, Equatable {
        case bluez
        case kernel
    }
    /// Where to save known devices, wanted connections and subscriptions (JSON, written
    /// atomically on every change); nil keeps nothing across restarts of the process.
    public var stateFilePath: String?
    /// Told on the loop when writing the state file starts failing (the error: a full or
    /// read-only file system) and when a write succeeds again (nil); once per episode, so the
    /// application can say that what a crash would restore lives in memory only meanwhile.
    public var stateFileProblem: (@Sendable (CentralError?) -> Void)?
    /// Backoff for automatic reconnection (1–5 s, doubling with jitter up to 60 s: the rule in
    /// docs/architecture.md, "Links: errors and reconnects").
    public var reconnect: ReconnectPolicy<SystemRandomNumberGenerator>.Configuration
    /// First delay before retrying `StartDiscovery` after `InProgress`/`NotReady`, in seconds;
    /// it doubles up to ``discoveryRetryMaximum``.
    public var discoveryRetryDelay: Double
    /// Upper bound of the discovery retry delay, in seconds.
    public var discoveryRetryMaximum: Double
    /// Use `AcquireNotify` (a socket per characteristic, no `PropertiesChanged` traffic, reads
    /// never show up as notifications) when BlueZ offers it (`NotifyAcquired` present and the
    /// characteristic has `notify`); otherwise `StartNotify`.
    public var preferAcquireNotify: Bool
    /// How long a GATT method call may take before it fails (BlueZ's own ATT timeout is 30 s).
    public var gattTimeout: Duration
    /// How long ``CentralManager/discoverServices(_:for:)`` waits for `ServicesResolved`.
    public var resolveTimeout: Duration
    /// Subscribe only to the object manager's signals and those below the adapter's own path
    /// (with an adapter chosen by name): for one central per adapter in one process, so that
    /// bluetoothd's signals about another adapter's devices are not delivered and decoded here.
    /// Other adapters' properties are then as read at the start (or at their return).
    public var adapterSignalsOnly = false
    /// Seconds between two tries to read BlueZ's objects while the bus refuses access
    /// (state `.unauthorized`): a D-Bus policy installed meanwhile is noticed that late.
    public var accessRetryInterval: Double = 5

    public init(
        adapter: AdapterSelector = .first, stateFilePath: String? = nil,
        reconnect: ReconnectPolicy<SystemRandomNumberGenerator>.Configuration = .init(),
        discoveryRetryDelay: Double = 0.5, discoveryRetryMaximum: Double = 30, preferAcquireNotify: Bool = true,
        gattTimeout: Duration = .seconds(35), resolveTimeout: Duration = .seconds(30)
    ) {
        self.adapter = adapter
        self.stateFilePath = stateFilePath
        self.reconnect = reconnect
        self.discoveryRetryDelay = discoveryRetryDelay
        self.discoveryRetryMaximum = discoveryRetryMaximum
        self.preferAcquireNotify = preferAcquireNotify
        self.gattTimeout = gattTimeout
        self.resolveTimeout = resolveTimeout
    }
}
