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
    /// Services added and advertising started while the adapter cannot be used (off, blocked,
    /// missing, bluetoothd gone) are kept and registered by themselves once it is powered on,
    /// as after a power cycle, instead of failing. What can be checked without BlueZ (the
    /// service tree, the advertisement's length) still fails at once.
    public var waitingForAdapter = false

    public init(
        adapter: AdapterSelector = .first, objectPath: DBusObjectPath = "/io/gattway/peripheral",
        callTimeout: Duration = .seconds(30)
    ) {
        self.adapter = adapter
        self.objectPath = objectPath
        self.callTimeout = callTimeout
    }
}
