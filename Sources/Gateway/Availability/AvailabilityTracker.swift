/// Availability of an advertisement-only device, evaluated on the clock: it learns the device's
/// advertising interval (moving average of the gaps between reports) and says when the device
/// is overdue — ``deadline(settings:fixedTimeout:)`` — so the gateway marks it offline at that
/// time rather than on the next advertisement.
///
/// 18 bytes (one per device): the times are NaN for none rather than `Double?` (16 bytes each),
/// and the gap count stops at 2, all that ``learnedInterval`` asks.
struct AvailabilityTracker: Sendable {
    private var lastTime = Double.nan
    private var averageGap = Double.nan
    private var gaps: UInt8 = 0
    /// What was last published: nil before the first publish.
    var published: Bool?

    private(set) var lastAdvertisement: Double? {
        get { lastTime.isNaN ? nil : lastTime }
        set { lastTime = newValue ?? .nan }
    }
    private(set) var interval: Double? {
        get { averageGap.isNaN ? nil : averageGap }
        set { averageGap = newValue ?? .nan }
    }

    /// Gaps shorter than this are duplicate reports of one advertising event.
    static let minimumGap = 0.02

    mutating func advertisement(at now: Double) {
        defer { lastAdvertisement = now }
        guard let last = lastAdvertisement else { return }
        let gap = now - last
        guard gap >= Self.minimumGap else { return }
        if gaps < 2 { gaps += 1 }
        interval = interval.map { $0 * 0.8 + gap * 0.2 } ?? gap
    }

    /// The learned interval, once two gaps were seen.
    var learnedInterval: Double? { gaps >= 2 ? interval : nil }

    /// How long without an advertisement means offline.
    func timeout(settings: AvailabilitySettings, fixedTimeout: Double?) -> Double {
        if let fixedTimeout { return fixedTimeout }
        guard let learned = learnedInterval else { return settings.fallbackTimeout }
        return max(settings.minimumTimeout, learned * Double(settings.missedIntervals))
    }

    /// When the device goes offline if nothing else arrives; nil before the first advertisement.
    func deadline(settings: AvailabilitySettings, fixedTimeout: Double?) -> Double? {
        lastAdvertisement.map { $0 + timeout(settings: settings, fixedTimeout: fixedTimeout) }
    }
}
