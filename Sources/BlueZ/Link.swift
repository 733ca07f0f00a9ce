import EventLoop
import Retry

/// A connection the ``CentralManager`` keeps up: its reconnect backoff and retry timer.
/// Actor-confined.
struct Link {
    var policy: ReconnectPolicy<SystemRandomNumberGenerator>
    var retryTimer: EventLoop.Token?
    /// An attempt (ours or a retry) is running.
    var connecting = false
    /// The link is up.
    var connected = false
    /// How many times the link came up: an attempt that sees it grow succeeded even when the
    /// link already dropped again before the attempt looked (a peer that drops at once, a slow host).
    var timesUp = 0
    /// Reconnect automatically after drops and failures.
    var autoReconnect = true

    init(configuration: ReconnectPolicy<SystemRandomNumberGenerator>.Configuration) {
        policy = ReconnectPolicy(configuration: configuration)
    }
}
