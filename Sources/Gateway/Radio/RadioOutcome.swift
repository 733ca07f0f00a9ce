/// What became of one advertisement report: published, or why not. The gateway's own decisions
/// (``RadioEntry/outcome``) and the parsers' verdict on the payload (``RadioEntry/decode``)
/// share these names.
public enum RadioOutcome: UInt8, Sendable, Hashable, CaseIterable {
    /// A parser decoded readings and the device's state took them (``RadioEntry/device``).
    case decoded
    /// A parser recognised the frame but it carried no values (a BTHome packet id only).
    case noValues
    /// A retransmission of the frame the device's state took last (`publish_repeats` off).
    case repeatedFrame
    /// No parser knows the payload.
    case unknownFormat
    /// An encrypted frame and no bind key for the address.
    case keyMissing
    /// An encrypted frame the address's bind key does not decrypt.
    case keyWrong
    /// A parser knew the format and rejected the payload (too short, malformed, …).
    case invalidPayload
    /// Neither service data nor manufacturer data: nothing for a parser.
    case noPayload
    /// The device's rule has `"advertisements": false`.
    case advertisementsOff
    /// No device rule matches the address (not tracked, not published).
    case noRule
    /// A rule matches, but the registry is full of devices that stay (`bluetooth.max_devices`).
    case registryFull
    /// Weaker than `bluetooth.scan.rssi_threshold`.
    case belowRSSIThreshold
    /// Advertises none of `bluetooth.scan.services`.
    case filteredByServices
    /// In a fleet: another gateway owns the device and publishes it.
    case otherOwner
    /// From a resolvable private address resolved to a presence identity: published under
    /// `<base>/presence/<name>`, never a device.
    case presence

    /// The name on MQTT and the page (`unknown_format`, `filtered_by_scan_services`, …).
    public var name: String {
        switch self {
        case .decoded: "decoded"
        case .noValues: "no_values"
        case .repeatedFrame: "repeated_frame"
        case .unknownFormat: "unknown_format"
        case .keyMissing: "key_missing"
        case .keyWrong: "key_wrong"
        case .invalidPayload: "invalid_payload"
        case .noPayload: "no_payload"
        case .advertisementsOff: "advertisements_off"
        case .noRule: "no_rule"
        case .registryFull: "registry_full"
        case .belowRSSIThreshold: "below_rssi_threshold"
        case .filteredByServices: "filtered_by_scan_services"
        case .otherOwner: "other_owner"
        case .presence: "presence"
        }
    }

    /// Whether the gateway stopped the report before a device's state saw it (so the parsers'
    /// verdict comes from a trial decode, and a rule might publish it).
    public var isUntracked: Bool {
        switch self {
        case .noRule, .registryFull, .belowRSSIThreshold, .filteredByServices, .presence: true
        default: false
        }
    }
}
