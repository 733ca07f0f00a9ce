/// A device in the registry: its slot, stable from registration to removal (a removed device's
/// slot is given to a later one). Features keep their per-device state by it; a job names its
/// device by address instead, because the device may be gone when the job ends.
struct DeviceID: Hashable, Sendable {
    let slot: Int32

    var index: Int { Int(slot) }
}
