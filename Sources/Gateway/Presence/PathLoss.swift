import JSON

#if canImport(Glibc)
    import Glibc
#endif

/// The distance estimate of presence: the log-distance path-loss model,
///
///     distance = 10 ^ ((rssi_at_1m - rssi) / (10 × absorption))   metres,
///
/// where `rssi_at_1m` is the RSSI the device gives at 1 m and `absorption` the path-loss exponent
/// (2 in free space, about 2.5 to 3.5 indoors through furniture and walls). docs/config.md
/// ("presence") has the worked examples the tests check.
public enum PathLoss {
    /// `presence.absorption` when not set: mid-range of indoor path-loss exponents.
    public static let defaultAbsorption = 3.0
    /// `presence.rssi_at_1m` when not set (dBm): what a phone advertising at about 0 dBm gives at
    /// 1 m on a typical adapter; calibrate per identity with `rssi_at_1m`.
    public static let defaultRSSIAt1m = -59.0
    /// The free-space loss of the first metre at 2.4 GHz (20·log10(4π·1 m / 12.5 cm) ≈ 40 dB, 41
    /// by the Eddystone convention): an advertised power at 0 m minus this is the RSSI at 1 m.
    public static let firstMetreLoss = 41.0

    /// The estimated distance in metres for a (smoothed) `rssi`.
    public static func distance(rssi: Double, rssiAt1m: Double, absorption: Double) -> Double {
        pow(10, (rssiAt1m - rssi) / (10 * absorption))
    }

    /// What the advertisement says of its own power.
    public enum AdvertisedPower: Sendable, Equatable {
        /// An iBeacon's measured power: the RSSI at 1 m itself (dBm).
        case atOneMetre(Int8)
        /// An Eddystone frame's TX power or the TX Power Level AD structure: the power at 0 m (dBm).
        case atSource(Int8)
    }

    /// The RSSI at 1 m to use: the identity's own `rssi_at_1m`, else the advertised power (a
    /// 0 dBm iBeacon measured power means "not calibrated" and is passed over), else `fallback`
    /// (`presence.rssi_at_1m`).
    public static func rssiAt1m(identity: Double?, advertised: AdvertisedPower?, fallback: Double) -> Double {
        if let identity { return identity }
        switch advertised {
        case .atOneMetre(let power)? where power < 0: return Double(power)
        case .atSource(let power)?: return Double(power) - firstMetreLoss
        default: return fallback
        }
    }

    /// `absorption`: a number from 1 to 10.
    static func absorption(_ reader: JSONReader) throws -> Double {
        let value = try reader.number()
        guard (1...10).contains(value) else {
            throw reader.fail("expected a path-loss exponent from 1 to 10 (2 in free space, about 3 indoors)")
        }
        return value
    }

    /// `rssi_at_1m`: a number of dBm from -127 to 0.
    static func rssiAt1m(_ reader: JSONReader) throws -> Double {
        let value = try reader.number()
        guard (-127...0).contains(value) else { throw reader.fail("expected dBm from -127 to 0, e.g. -59") }
        return value
    }
}

/// The smoothed RSSI of one identity: an exponential moving average whose weight follows the time
/// between reports, `smoothed += (1 − e^(−Δt/τ)) × (rssi − smoothed)` with τ = ``timeConstant``,
/// so a device heard ten times a second and one heard every two seconds settle equally fast (in
/// wall time). The first report is taken as it is.
public struct RSSISmoother: Sendable, Equatable {
    /// τ in seconds: after τ a step in RSSI is 63 % through, after 3τ 95 %.
    public static let timeConstant = 4.0

    public private(set) var value: Double?
    private var last = 0.0

    public init() {}

    /// Takes the report of `rssi` at `now` (seconds); the smoothed RSSI.
    public mutating func add(_ rssi: Double, now: Double) -> Double {
        guard let previous = value else {
            value = rssi
            last = now
            return rssi
        }
        let elapsed = max(0, now - last)
        last = max(last, now)
        let weight = 1 - exp(-elapsed / Self.timeConstant)
        let next = previous + weight * (rssi - previous)
        value = next
        return next
    }
}
