import Bluetooth
import JSON

/// The core's feature behind the radio's view: fills the ``RadioView`` with every report and
/// what became of it, and — with `mqtt.raw_advertisements` on — publishes the reports on
/// `<base>/bridge/radio/<address>` (QoS 0, never retained, not queued while offline), at most
/// one per address per interval. Made only when the view can be wanted (the web server or the
/// raw radio on); it listens — notes reports — only while it is wanted (``listening(now:)``):
/// with the raw radio on MQTT, or while the page asked for it within ``demandSpan`` or follows it.
/// Not listening, the advertisement path does nothing more than without it (``Gateway``).
/// Loop-confined.
final class RawRadio {
    let view: RadioView
    private let context: CoreContext
    private let states: DeviceStates
    /// `mqtt.raw_advertisements` (``RawAdvertisementSettings/enabled``: publish).
    private let settings: RawAdvertisementSettings
    private let adapters: [String]
    private let topicPrefix: String
    /// Messages published on `bridge/radio/…`, and reports not published because their address
    /// had one within the interval (`dropped.radio_rate_limited`).
    private(set) var published = 0
    private(set) var rateLimited = 0
    /// The gateway clock's time until which the page's last ask keeps the view listening.
    private var demandedUntil = -Double.infinity
    /// How long one ask of the page (``demand(now:)``) keeps the view listening: the page asks
    /// with every refresh (every 2 s on its radio view, every 10 s on its device list).
    static let demandSpan = 60.0
    /// The wall clock's milliseconds minus the gateway clock's, and the gateway clock's time it
    /// was read (``wall(at:)``).
    private var wallOffset = 0.0
    private var wallOffsetAt = -Double.infinity
    /// How old the view's content of an address may be when only the page reads it
    /// (``RadioView/contentInterval``): the page reads it every 2 s.
    static let pageContentInterval = 1.0

    init(context: CoreContext, states: DeviceStates) {
        self.context = context
        self.states = states
        let config = context.config
        settings = config.mqtt.rawAdvertisements
        view = RadioView(maxAddresses: settings.maxAddresses, window: settings.window, now: context.clock.now())
        adapters = config.bluetooth.adapters
        topicPrefix = context.bridge + "/radio/"
        // The raw radio on MQTT publishes (and in `changed` mode compares) each report's content.
        view.contentInterval = settings.enabled ? 0 : Self.pageContentInterval
    }

    /// Whether reports are noted now: the raw radio on MQTT is on, the page asked within
    /// ``demandSpan``, or something follows the view (``RadioView/observe(_:)``).
    @inline(__always)
    func listening(now: @autoclosure () -> Double) -> Bool {
        if settings.enabled || view.isObserved { return true }
        guard demandedUntil > -Double.infinity else { return false }  // no clock read while unasked
        if now() < demandedUntil { return true }
        demandedUntil = -Double.infinity
        return false
    }

    /// The gateway clock's time of a report when the view listens (``listening(now:)``), nil
    /// when it does not: `sighted`, the core's reading of the clock for this report when it took
    /// one (a tracked device's), else the clock read at most once; handed to
    /// ``heard(_:outcome:now:tracked:)``.
    @inline(__always)
    func listeningTime(sighted: Double?) -> Double? {
        if settings.enabled || view.isObserved { return sighted ?? context.clock.now() }
        guard demandedUntil > -Double.infinity else { return nil }  // no clock read while unasked
        let now = sighted ?? context.clock.now()
        if now < demandedUntil { return now }
        demandedUntil = -Double.infinity
        return nil
    }

    /// The page wants the view: it listens for ``demandSpan`` from `now`. Returns whether it
    /// was not listening before (the view starts filling now).
    @discardableResult
    func demand(now: Double) -> Bool {
        let was = listening(now: now)
        demandedUntil = now + Self.demandSpan
        return !was
    }

    /// One report and what became of it: `outcome`; for a report of a device, `tracked` names
    /// it (its topic level and format; asked only when the view takes the report's content:
    /// ``RadioView/contentInterval``). `now`: the gateway clock's time.
    /// Not inlined: callgrind counts it (scripts/callgrind-per-report.py).
    @inline(never)
    func heard(
        _ discovery: BLEDiscovery, outcome: RadioOutcome, now: Double,
        tracked: () -> (device: String, format: String?)?
    ) {
        let states = self.states
        let decode: RadioOutcome?
        switch outcome {
        case .decoded, .noValues, .repeatedFrame, .unknownFormat, .keyMissing, .keyWrong, .invalidPayload:
            decode = outcome
        case .noPayload: decode = .noPayload
        default: decode = nil  // untracked, rule off, other owner: a trial decode says
        }
        let slot = view.note(
            discovery, outcome: outcome, decode: decode, now: now, wallOffset: wallOffset(at: now),
            details: {
                let device = tracked()
                return (decode == nil ? nil : device?.format, device?.device)
            }, trial: { states.trialDecode($0.advertisement, address: $0.address) })
        guard settings.enabled else { return }
        switch view.publishDecision(slot, mode: settings.mode, interval: settings.interval, now: now) {
        case .unchanged: return
        case .rateLimited:
            rateLimited += 1
            context.counters.dropped.radioRateLimited += 1
        case .publish:
            published += 1
            let entry = view.entry(at: slot)
            let output = context.output
            output.scratch.removeAll(keepingCapacity: true)
            entry.write(adapters: adapters, into: &output.scratch)
            output.publish(
                topicPrefix + entry.address.description, output.scratch, retain: false, qos: 0, kind: .snapshot)
        }
    }

    /// The wall clock's milliseconds minus the gateway clock's at `now`, read again at most once
    /// a second (so that a step of the wall clock shows within one), not a wall-clock read per
    /// report; the view makes a report's wall time of it when it is read.
    @inline(__always)
    private func wallOffset(at now: Double) -> Double {
        if !(now - wallOffsetAt < 1 && now >= wallOffsetAt) {
            wallOffset = Double(context.clock.wallMilliseconds()) - now * 1000
            wallOffsetAt = now
        }
        return wallOffset
    }

    /// `bridge/health`'s `raw_radio` section.
    func healthSection() -> JSONValue {
        .object([
            ("addresses", .number(Double(view.count))),
            ("max_addresses", .number(Double(view.maxAddresses))),
            ("evicted", .number(Double(view.evicted))),
            ("reports_per_second", .number((view.reportsPerSecond * 10).rounded() / 10)),
            ("published", .number(Double(published))),
            ("listening", .bool(listening(now: context.clock.now()))),
        ])
    }
}
