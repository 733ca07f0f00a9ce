import JSON

/// What a GATT job of a device did: the values it read (in order), the `data` of a raw read's
/// response, and how it failed, if it did.
struct GATTOutcome: Sendable {
    var values: [(ref: CharacteristicRef, value: [UInt8])] = []
    var data: JSONValue?
    var failure: JobFailure?
    /// Seconds the GATT operations took.
    var seconds: Double = 0
}

/// One GATT operation of a job, with its characteristic resolved when the job started (nil:
/// not on the device — the job fails there, after the operations before it).
struct GATTStep: Sendable {
    enum Action: Sendable {
        case write([UInt8], withResponse: Bool)
        /// Read; `ref` names the configured characteristic the value is for (nil: raw).
        case read(CharacteristicRef?)
    }

    var action: Action
    var characteristic: BLECharacteristic?
    /// What the step is called in errors ("brightness: write", "read 2A19").
    var what: String
    /// The error when the characteristic is missing.
    var missing: String
}
