import DBus

/// How a ``PeripheralManager`` behaves; every field has a production default.
public struct PeripheralOptions: Sendable {
    /// The adapter to publish on (default: the first adapter with the `peripheral` role,
    /// preferring a powered one).
    public var adapter: AdapterSelector
    /// Where the GATT application and the advertisement are exported on this process's bus
    /// connection: the application's ObjectManager is `<objectPath>/app`, the advertisement
    /// `<objectPath>/advertisement0`.
    public var objectPath: DBusObjectPath
    /// How long `RegisterApplication`, `RegisterAdvertisement` and their unregistering may take.
    public var callTimeout: Duration

    public init(
        adapter: AdapterSelector = .first, objectPath: DBusObjectPath = "/io/gattway/peripheral",
        callTimeout: Duration = .seconds(30)
    ) {
        self.adapter = adapter
        self.objectPath = objectPath
        self.callTimeout = callTimeout
    }
}
