/// Things the gateway dropped on purpose, by reason (for `bridge/health`).
public struct DropCounters: Sendable, Equatable {
    /// Advertisements below `scan.rssi_threshold` or without a scanned service.
    public var filtered = 0
    /// Advertised frames already taken (a sensor repeats each frame over several advertising
    /// events): same counter, or without one the same bytes, as the device's last frame.
    public var repeatedFrame = 0
    /// State messages rate control held back (`only_changes`, thresholds).
    public var rateControl = 0
    /// Commands refused by `commands.rate_limit`.
    public var rateLimited = 0
    /// Devices dropped or forgotten because the registry reached `bluetooth.max_devices`.
    public var registryFull = 0
    /// Commands published with the retain flag, answered and not run.
    public var retainedCommand = 0
    /// MQTT 5 response topics refused (answered on the default response topic instead).
    public var responseTopic = 0
    /// Encrypted advertisements of a device without a bind key (config.json or runtime).
    public var keyMissing = 0
    /// Encrypted advertisements whose MIC check failed with the device's bind key (a wrong key).
    public var keyWrong = 0
    /// In a fleet: commands for a device another gateway owns (that gateway runs and answers them).
    public var otherOwner = 0
    /// Pairing questions, pair requests and answers refused: a device no rule names, no question
    /// waiting, too many questions.
    public var pairingRefused = 0
    /// Reports the raw radio (`mqtt.raw_advertisements`) did not publish because their address
    /// had a message on `bridge/radio/<address>` within its interval.
    public var radioRateLimited = 0
    /// Notifications of exactly the link's MTU − 3 bytes whose parser needed more: the value is
    /// longer than a notification can carry and arrived cut (``NotificationCut``).
    public var notificationCut = 0

    public init() {}
}
