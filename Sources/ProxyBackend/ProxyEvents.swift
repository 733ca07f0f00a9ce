import ESPHomeAPI

/// Where ``ProxyBackend`` sends what happens on the Bluetooth side without a request of the
/// client's — a link lost, a notification value, a change of the shared free slots — and where
/// it reads the counters of `bridge/health`: the ESPHome API server (``APIServer``), or a
/// recording fake in tests. Loop thread.
public protocol ProxyEvents: AnyObject, Sendable {
    func connectionLost(address: UInt64, error: Int32)
    func notification(address: UInt64, handle: UInt16, data: [UInt8])
    func connectionSlotsChanged()
    var statistics: APIServerStatistics { get }
}

extension APIServer: ProxyEvents {}
