import DBus

/// One adapter's discovery clients, as bluetoothd 5.66 keeps them: a session per D-Bus unique
/// name that called StartDiscovery, and a filter per client that may be set before, during or
/// after a session (it survives StopDiscovery until cleared with an empty filter).
public struct DiscoverySessions: Sendable, Equatable {
    /// Clients with a session, in start order.
    public private(set) var clients: [String] = []
    /// Filters by client (pre-set or active).
    public private(set) var filters: [String: DiscoveryFilter] = [:]

    public init() {}

    /// True while at least one session exists (the adapter scans, `Discovering` is true).
    public var isDiscovering: Bool { !clients.isEmpty }

    /// The filter the scan runs with.
    public var merged: MergedDiscoveryFilter { MergedDiscoveryFilter(clients.map { filters[$0] }) }

    /// `StartDiscovery` from `client`; returns true when the scan starts now (the first session).
    /// - Throws: `InProgress` "Operation already in progress" when the client has a session.
    public mutating func start(_ client: String) throws -> Bool {
        guard !clients.contains(client) else { throw BlueZError.busy }
        clients.append(client)
        return clients.count == 1
    }

    /// `StopDiscovery` from `client`; returns true when the scan stops now (the last session).
    /// - Throws: `Failed` "No discovery started" when the client has no session.
    public mutating func stop(_ client: String) throws -> Bool {
        guard let index = clients.firstIndex(of: client) else { throw BlueZError.failed("No discovery started") }
        clients.remove(at: index)
        return clients.isEmpty
    }

    /// `SetDiscoveryFilter`: nil (an empty dictionary) removes the client's filter.
    public mutating func setFilter(_ filter: DiscoveryFilter?, for client: String) {
        filters[client] = filter
    }

    /// The client left the bus: its session and filter go. Returns true when the scan stops now.
    public mutating func remove(_ client: String) -> Bool {
        filters.removeValue(forKey: client)
        guard let index = clients.firstIndex(of: client) else { return false }
        clients.remove(at: index)
        return clients.isEmpty
    }

    /// Power-off: every session is dropped (filters are kept). Returns true when a scan stopped.
    public mutating func dropAll() -> Bool {
        defer { clients.removeAll() }
        return !clients.isEmpty
    }
}
