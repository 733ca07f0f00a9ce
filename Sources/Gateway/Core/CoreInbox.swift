/// Where the core's events go: the gateway. Made before the features, which keep
/// ``CoreContext/deliver``, and pointed at the gateway by ``Gateway``'s initializer as soon as
/// the gateway exists — before a port or a job can hold it. An event that arrives after the
/// gateway is gone is dropped.
final class CoreInbox: @unchecked Sendable {
    /// Written once, in ``Gateway``'s initializer, before the inbox is shared; only read after.
    weak var gateway: Gateway?

    func deliver(_ event: CoreEvent) { gateway?.receive(event) }
}
