import Parsers

#if canImport(Glibc)
    import Glibc
#endif

/// The `gattway` command-line tool as a library: `run`, `config check`, `scan`, `decode` and every
/// other command, with Swift parsers of the caller's own package added to the built-in ones.
///
/// A package that depends on the products `GattwayKit` and `Parsers` writes its executable's
/// `main.swift` as one call:
///
/// ```swift
/// import GattwayKit
/// import Parsers
///
/// Gattway.main(parsers: [StrapPulse()], advertisementParsers: [MysteryTag()])
/// ```
///
/// and gets a `gattway` that also knows those formats (docs/parsers.md, "Your own Swift parsers";
/// Examples/custom-parser is a complete package).
public enum Gattway {
    /// Runs the command line of this process (`CommandLine.arguments`) and exits with its code.
    ///
    /// `parsers` and `advertisementParsers` are registered after the built-ins, in order
    /// (``ParserRegistry/builtIn(adding:_:)``): a characteristic parser with the name or UUID of a
    /// built-in replaces it, an advertisement parser is tried before the built-ins (and before the
    /// ones earlier in the list) for its keys. Declarative parsers from config.json come after them.
    ///
    /// Call it first in `main.swift`, before starting any thread: it sets the process's malloc
    /// arenas and its ``ParserRegistry/active`` registry, both meant to be set once at start.
    public static func main(
        parsers: [any CharacteristicParser] = [], advertisementParsers: [any AdvertisementParser] = []
    ) -> Never {
        #if canImport(Glibc)
            // At most two malloc arenas (glibc's default is 8 per core, one per thread that
            // allocates): the loop thread and the cooperative pool's threads would otherwise each
            // keep their own arena's free memory resident after a burst (BENCHMARKS.md, resident
            // memory). Before any thread starts. `mallopt` is in <malloc.h>, which the Glibc module
            // does not export; M_ARENA_MAX is -8.
            if let symbol = dlsym(nil, "mallopt") {
                typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
                _ = unsafeBitCast(symbol, to: Mallopt.self)(-8, 2)
            }
        #endif
        if !parsers.isEmpty || !advertisementParsers.isEmpty {
            ParserRegistry.activate(ParserRegistry.builtIn(adding: parsers, advertisementParsers))
        }
        // The tool runs as a task while the main thread only waits. Had this function an `await`,
        // it would be async and so would main, which then ends in dispatch_main(), whose
        // pthread_exit() unwinds the main thread's stack: the unwinder's lookups touch most of the
        // binary's .eh_frame_hdr and parts of .eh_frame, ~0.5 MB that then stays resident in every
        // process (BENCHMARKS.md, session 4). Nothing here uses the main queue or the main actor.
        Task.detached {
            exit(await CommandLineTool(commands: allCommands()).main(Array(CommandLine.arguments.dropFirst())).rawValue)
        }
        while true { pause() }
    }

    /// Every subcommand, in the order `gattway --help` lists them.
    static func allCommands() -> [any Command.Type] {
        [
            RunCommand.self,
            ConfigCheckCommand.self,
            ScanCommand.self,
            InspectCommand.self,
            ReadCommand.self,
            WriteCommand.self,
            NotifyCommand.self,
            AdvertiseCommand.self,
            ServeCommand.self,
            DecodeCommand.self,
            SimulateCommand.self,
            DemoCommand.self,
            ProxyResetKeyCommand.self,
            DoctorCommand.self,
            VersionCommand.self,
        ]
    }
}
