import DBus

/// A running notification burst (control interface `Burst`): `count` notifications carrying a
/// little-endian u32 sequence number, at `rate` per second or (rate 0) as fast as the loop can.
struct BurstState {
    var device: DBusObjectPath
    var characteristic: DBusObjectPath
    var count: Int
    var rate: Double
    var sent = 0
    var started: UInt64
}
