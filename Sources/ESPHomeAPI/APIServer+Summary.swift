import EventLoop

/// One API client as the operator's page shows it (nothing secret: no key, no password).
public struct APIClientSummary: Sendable, Equatable {
    /// Its address and port.
    public var peer: String
    /// What its HelloRequest said (its name and version), and the API version it speaks; nil
    /// before the hello (a Noise handshake under way).
    public var info: String?
    public var apiVersion: String?
    /// Seconds since it connected.
    public var connectedSeconds: Double
    /// It subscribed to the advertisements (SubscribeBluetoothLEAdvertisementsRequest).
    public var subscribedAdvertisements: Bool
    /// It subscribed to the connection slots (BluetoothConnectionsFreeResponse).
    public var subscribedConnections: Bool
}

/// A connection through the proxy: which device, for which client, up yet or not.
public struct APIProxyConnectionSummary: Sendable, Equatable {
    public var address: UInt64
    /// The holding client's address and port (nil: it is gone, the link is ending).
    public var client: String?
    public var connected: Bool
}

extension APIServer {
    /// The clients connected now, in the order they came. Loop thread.
    public var clientSummaries: [APIClientSummary] {
        let now = EventLoop.now()
        return clients.values.sorted { $0.id < $1.id }.map { client in
            APIClientSummary(
                peer: client.peer, info: client.hello?.info, apiVersion: client.hello?.api,
                connectedSeconds: Double(now &- client.acceptedAt) / 1e9,
                subscribedAdvertisements: client.session.subscribed,
                subscribedConnections: client.connectionsFreeSubscribed)
        }
    }

    /// The connections through the proxy now, by address. Loop thread.
    public var connectionSummaries: [APIProxyConnectionSummary] {
        proxyConnections.keys.sorted().compactMap { address in
            guard let connection = proxyConnections[address] else { return nil }
            return APIProxyConnectionSummary(
                address: address, client: clients[connection.owner]?.peer, connected: connection.connected)
        }
    }
}
