import DBus

extension PeripheralManager {
    static let advertisementInterface = "org.bluez.LEAdvertisement1"

    /// Whether BlueZ has the advertisement registered now (`isAdvertising`).
    public var isAdvertising: Bool { advertisementRegistered }

    /// Starts advertising (`startAdvertising(_:)`) through
    /// `org.bluez.LEAdvertisingManager1.RegisterAdvertisement`; returns when BlueZ accepted it.
    ///
    /// The 31-byte legacy limit is checked first (``Advertisement/checkLegacyLength(operation:)``)
    /// and nothing reaches BlueZ when it is exceeded.
    /// - Throws: ``PeripheralError``: ``PeripheralError/Code/advertisementTooLarge``,
    ///   ``PeripheralError/Code/alreadyExists`` when already advertising (use
    ///   ``updateAdvertisement(_:)``), BlueZ's refusal (``PeripheralError/Code/invalidAdvertisement``,
    ///   ``PeripheralError/Code/tooManyAdvertisements``), the state's error when not `.poweredOn`.
    public func startAdvertising(_ advertisement: Advertisement) async throws {
        let operation = "\(Self.advertisingManager).RegisterAdvertisement"
        let now = try registersNow(operation)
        // Kept for the adapter: what fits extended advertising is fitted at registration.
        let advertisement = now ? try await fitted(advertisement, operation: operation) : advertisement
        if !now { try Self.extendedIfLonger(advertisement).checkLength(operation: operation) }
        try await serialized {
            guard self.advertisement == nil else {
                throw PeripheralError(
                    .alreadyExists, operation: operation,
                    message: "already advertising; update or stop the advertisement first")
            }
            guard try registersNow(operation) else {
                // Registered by itself once the adapter is powered on (recover()).
                self.advertisement = advertisement
                advertisementUnfitted = true
                try exportAdvertisement(advertisement)
                return
            }
            self.advertisement = advertisement
            do {
                try exportAdvertisement(advertisement)
                try await registerAdvertisement()
            } catch {
                self.advertisement = nil
                unexportAdvertisement()
                throw PeripheralError.wrap(error, operation: operation)
            }
            emit(.advertisingStarted)
        }
    }

    /// Changes what is advertised while advertising. bluetoothd (5.66 and later) watches the
    /// advertisement's `PropertiesChanged` and refreshes the data; a change of ``Advertisement/kind``
    /// or a field removed re-registers the advertisement instead.
    /// - Throws: ``PeripheralError``: ``PeripheralError/Code/advertisementTooLarge`` (nothing changes),
    ///   ``PeripheralError/Code/unknownAttribute`` when not advertising.
    public func updateAdvertisement(_ advertisement: Advertisement) async throws {
        let operation = "update the advertisement"
        let advertisement = try await fitted(advertisement, operation: operation)
        try await serialized {
            guard let current = self.advertisement else {
                throw PeripheralError(
                    .unknownAttribute, operation: operation, message: "not advertising; start advertising first")
            }
            guard current != advertisement else { return }
            self.advertisement = advertisement
            let old = Dictionary(current.bluezProperties, uniquingKeysWith: { a, _ in a })
            let new = advertisement.bluezProperties
            let removed = new.contains { name, value in value == nil && old[name]! != nil }
            if current.kind != advertisement.kind || removed {
                if advertisementRegistered, let adapter = registeredAdapter {
                    advertisementRegistered = false
                    await unregisterAdvertisement(from: adapter)
                }
                unexportAdvertisement()
                try exportAdvertisement(advertisement)
                if state == .poweredOn {
                    do {
                        try await registerAdvertisement()
                    } catch {
                        throw PeripheralError.wrap(error, operation: operation)
                    }
                    emit(.advertisingStarted)
                }
                return
            }
            let changes = new.filter { name, value in value != nil && old[name]! != value }.map {
                (key: $0.0, value: $0.1)
            }
            try setAdvertisementProperties(changes)
        }
    }

    /// One `PropertiesChanged` on the advertisement, which bluetoothd turns into new data.
    private func setAdvertisementProperties(_ changes: [(key: String, value: DBusValue?)]) throws {
        let path = advertisementPath
        try connection.assumeIsolated { connection in
            try connection.setProperties(changes, interface: Self.advertisementInterface, at: path, emit: true)
        }
    }

    /// Stops advertising (`stopAdvertising()`): `UnregisterAdvertisement` (BlueZ does not call
    /// `Release` for it) and the object is removed. Does nothing when not advertising.
    public func stopAdvertising() async {
        _ = try? await serialized {
            guard advertisement != nil else { return }
            advertisement = nil
            advertisementUnfitted = false
            if advertisementRegistered, let adapter = registeredAdapter, bluezOwner != nil {
                await unregisterAdvertisement(from: adapter)
            }
            advertisementRegistered = false
            unexportAdvertisement()
        }
    }

    /// `advertisement` as it is sent: as given when it fits its payload; with "1M" as its
    /// ``Advertisement/secondaryChannel`` (extended advertising, up to 251 bytes) when it does not
    /// fit the 31-byte legacy payload and the adapter supports extended advertising.
    /// - Throws: ``PeripheralError/Code/advertisementTooLarge`` naming the fields and, for an
    ///   adapter without extended advertising, saying so.
    func fitted(_ advertisement: Advertisement, operation: String) async throws -> Advertisement {
        guard advertisement.secondaryChannel == nil, advertisement.legacyPayloadLength > Advertisement.legacyLimit
        else {
            try advertisement.checkLength(operation: operation)
            return advertisement
        }
        let channels = await supportedSecondaryChannels()
        guard let channel = channels.contains("1M") ? "1M" : channels.first else {
            try advertisement.checkLength(
                operation: operation,
                note: " (this adapter has no extended advertising: BlueZ lists no SupportedSecondaryChannels)")
            return advertisement
        }
        var extended = advertisement
        extended.secondaryChannel = channel
        try extended.checkLength(operation: operation)
        return extended
    }

    /// `advertisement` as extended advertising (1M) when it is longer than legacy advertising
    /// allows, for checking its length before the adapter says what it supports.
    static func extendedIfLonger(_ advertisement: Advertisement) -> Advertisement {
        guard advertisement.secondaryChannel == nil, advertisement.legacyPayloadLength > Advertisement.legacyLimit
        else { return advertisement }
        var extended = advertisement
        extended.secondaryChannel = "1M"
        return extended
    }

    /// Exports `advertisement` in place of the one exported now.
    func reexportAdvertisement(_ advertisement: Advertisement) throws {
        unexportAdvertisement()
        self.advertisement = advertisement
        try exportAdvertisement(advertisement)
    }

    /// The adapter's `LEAdvertisingManager1.SupportedSecondaryChannels` ("1M", "2M", "Coded"):
    /// what extended advertising it supports; empty when BlueZ does not list any (the property
    /// is absent without extended advertising) or cannot be asked.
    public func supportedSecondaryChannels() async -> [String] {
        guard let adapterPath else { return [] }
        let reply = try? await callBlueZ(
            adapterPath, "org.freedesktop.DBus.Properties", "Get",
            [.string(Self.advertisingManager), .string("SupportedSecondaryChannels")])
        return reply?.first?.strings ?? []
    }

    /// `UnregisterAdvertisement` of our advertisement on `adapter`, best effort (BlueZ does not
    /// call `Release` for it; an error means it was not registered any more).
    func unregisterAdvertisement(from adapter: DBusObjectPath, timeout: Duration? = nil) async {
        _ = try? await callBlueZ(
            adapter, Self.advertisingManager, "UnregisterAdvertisement", [.objectPath(advertisementPath)],
            timeout: timeout)
    }

    func registerAdvertisement() async throws {
        guard let adapterPath else { throw stateError("register the advertisement") }
        do {
            _ = try await callBlueZ(
                adapterPath, Self.advertisingManager, "RegisterAdvertisement",
                [.objectPath(advertisementPath), .variantDictionary([String: DBusValue]())])
        } catch let error as DBusError where error.name.rawValue == "org.bluez.Error.AlreadyExists" {
            // Still registered from before a power cycle.
        } catch {
            throw PeripheralError.wrap(error, operation: "\(Self.advertisingManager).RegisterAdvertisement")
        }
        advertisementRegistered = true
        registeredAdapter = adapterPath
    }

    private func exportAdvertisement(_ advertisement: Advertisement) throws {
        let values = Dictionary(advertisement.bluezProperties, uniquingKeysWith: { a, _ in a })
        let interface = DBusInterface(
            Self.advertisementInterface,
            methods: [
                .immediate("Release") { [weak self] call in
                    self?.onLoop { $0.released(call) }
                    return []
                }
            ],
            properties: Advertisement.propertyTypes.map { name, type in
                DBusProperty(name, type: type, value: values[name] ?? nil)
            })
        let path = advertisementPath
        try connection.assumeIsolated { connection in try connection.export([interface], at: path, announce: false) }
        advertisementExported = true
    }

    private func unexportAdvertisement() {
        guard advertisementExported else { return }
        advertisementExported = false
        let path = advertisementPath
        connection.assumeIsolated { connection in try? connection.unexport(at: path, announce: false) }
    }

    /// A link of the advertising adapter went down. A controller stops a connectable advertisement
    /// when a central connects, and the kernel is to start it again after the disconnection; it
    /// does not always (seen with bluetoothd 5.66 on Linux 6.1 in the real-BlueZ lane, and reported
    /// as bluez/bluez issues #644 and #1015), and the adapter is then neither found nor connectable
    /// until the advertisement is registered anew. So it is, 200 ms after the link went down
    /// (links that go down together are one re-registration): `UnregisterAdvertisement`, then
    /// `RegisterAdvertisement` with the same object. No event: nothing changed for the app.
    func centralDisconnected() {
        guard advertisement != nil, advertisementRegistered, !readvertisePending, !closed else { return }
        readvertisePending = true
        Task {
            try? await Task.sleep(for: .milliseconds(200))
            await self.readvertise()
        }
    }

    private func readvertise() async {
        readvertisePending = false
        _ = try? await serialized {
            guard !closed, state == .poweredOn, advertisement != nil, advertisementRegistered,
                let adapter = registeredAdapter
            else { return }
            advertisementRegistered = false
            await unregisterAdvertisement(from: adapter)
            do {
                try await registerAdvertisement()
            } catch {
                // Registered again at the next power-on or bluetoothd start, as after a Release.
                emit(
                    .advertisingStopped(
                        reason: "registering it again after a central disconnected failed: \(error)"))
            }
        }
    }

    /// bluetoothd dropped the advertisement (timeout, adapter or daemon going away). It stays
    /// wanted and is registered again at the next power-on or bluetoothd start.
    func released(_ call: DBusMessage) {
        guard call.sender != nil, call.sender == bluezOwner, advertisementRegistered else { return }
        advertisementRegistered = false
        emit(.advertisingStopped(reason: "bluetoothd released the advertisement"))
    }
}
