import Bluetooth
import JSON

/// A feature outside the core that shares its connection slots and runs its long operations as
/// the core's jobs — the Home Assistant Bluetooth proxy's backend (docs/ha-bluetooth-proxy.md),
/// which the Gateway target does not know. Made before the gateway and handed to
/// ``Gateway/init(config:ble:peripheral:mqtt:clock:loop:reconnect:logger:version:stateDirectory:processSample:healthExtra:attachment:)``,
/// which gives it its way into the core (``attach(_:)``) before it returns; the core then
/// routes to it the completions of its jobs, the changes of the free slots and the health
/// report. Every call but ``attach(_:)`` comes on the loop thread, inside the handling of an
/// event of the core.
public protocol GatewayAttachment: AnyObject, Sendable {
    /// Called once, by the gateway's initializer (on the thread that makes the gateway).
    func attach(_ core: AttachedCore)
    /// A job spawned with ``AttachedCore/spawn(_:)`` ended with `outcome` (what it returned),
    /// handled as one event of the core.
    func completed(_ outcome: any Sendable)
    /// ``AttachedCore/freeSlots`` changed with the event just handled (a link of the gateway's
    /// starting or ending, a reservation); at most once per event.
    func connectionSlotsChanged()
    /// Sections appended to `bridge/health`.
    func healthSections() -> [(key: String, value: JSONValue)]
}

/// What a ``GatewayAttachment`` may do in the core, on the loop thread only (each call checks
/// it): take and give back connection slots of `bluetooth.max_connections` (the
/// ``ConnectionScheduler``'s reservations: at once or not at all, never queued), ask whether the
/// gateway holds a link, and run jobs on the core's job runner. It holds the gateway weakly:
/// after the gateway is gone every reservation is refused and every job dropped.
public struct AttachedCore: Sendable {
    private weak let gateway: Gateway?

    init(_ gateway: Gateway) { self.gateway = gateway }

    /// Takes a slot for the attachment's link to `address`, at once or not at all: true when a
    /// slot is free, when the gateway's own link to the device holds one (shared), or when it is
    /// reserved already. Handled as one event of the core.
    public func reserveSlot(_ address: BluetoothAddress) -> Bool {
        gateway?.assumeLoopIsolated { $0.reserveConnectionSlot(for: address) } ?? false
    }

    /// The attachment's link to `address` is over (no-op without a reservation): the slot goes to
    /// the next device waiting, unless the gateway's own link keeps it. Handled as one event.
    public func releaseSlot(_ address: BluetoothAddress) {
        gateway?.assumeLoopIsolated { $0.releaseConnectionSlot(for: address) }
    }

    /// Connection slots free now (the gateway's links and the reservations taken out).
    public var freeSlots: Int { gateway?.assumeLoopIsolated { $0.freeConnectionSlots } ?? 0 }

    /// Whether the gateway has a link to the device or is making one (the attachment leaves such
    /// a link up when it is done with it).
    public func holdsLink(_ address: BluetoothAddress) -> Bool {
        gateway?.assumeLoopIsolated { $0.holdsLink(to: address) } ?? false
    }

    /// Runs `job` as a job of the core (a child task of ``Gateway/run()``, on the loop); what it
    /// returns goes to ``GatewayAttachment/completed(_:)`` as an event. Dropped once the gateway
    /// stopped; cancelled with the core's jobs.
    public func spawn(_ job: @escaping @Sendable () async -> any Sendable) {
        gateway?.assumeLoopIsolated { $0.spawnAttachmentJob(job) }
    }
}
