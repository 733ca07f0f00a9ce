import Bluetooth

extension Gateway {
    /// The names of the presence identities, config.json's then those set at run time; empty
    /// without a `presence` section.
    package var presenceIdentityNames: [String] { presence?.identities.map(\.name) ?? [] }

    /// The name of the presence identity that sent `discovery`, if any (nil without a `presence`
    /// section): what the presence output ties a report to.
    package func presenceIdentity(of discovery: BLEDiscovery) -> String? {
        guard let presence,
            let match = presence.matcher.identify(
                discovery.address, type: discovery.addressType, advertisement: discovery.advertisement)
        else { return nil }
        return presence.identities[match.identity].name
    }
}
