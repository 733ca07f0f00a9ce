import Synchronization

extension ParserRegistry {
    /// The registry of this process: what `gattway`'s commands and the gateway decode with
    /// (``GatewayConfig``'s default registry, `scan`, `inspect`, `read`, `notify`, `decode`).
    ///
    /// ``builtIn`` until ``activate(_:)`` replaces it; `Gattway.main(parsers:advertisementParsers:)`
    /// (GattwayKit) activates the built-ins plus a user package's Swift parsers before any command
    /// runs. Readers take a copy (a registry is a value), so activate first, then start work:
    /// a config parsed before the call keeps the registry it was parsed with. The lock makes a
    /// late call safe, not useful.
    public static var active: ParserRegistry {
        activeRegistry.withLock { $0 } ?? builtIn
    }

    /// Makes `registry` the process's ``active`` registry.
    public static func activate(_ registry: ParserRegistry) {
        activeRegistry.withLock { $0 = registry }
    }

    /// ``builtIn`` with `characteristics` and then `advertisements` registered after it: a
    /// characteristic parser replaces the built-in one of its UUID and name, an advertisement
    /// parser is tried before the built-ins for its keys.
    public static func builtIn(
        adding characteristics: [any CharacteristicParser], _ advertisements: [any AdvertisementParser]
    ) -> ParserRegistry {
        var registry = builtIn
        for parser in characteristics { registry.register(parser) }
        for parser in advertisements { registry.register(parser) }
        return registry
    }
}

/// Nil until ``ParserRegistry/activate(_:)``; a lock, not `nonisolated(unsafe)`, so that reading
/// it is safe from any thread under strict concurrency whatever the order of calls.
private let activeRegistry = Mutex<ParserRegistry?>(nil)
