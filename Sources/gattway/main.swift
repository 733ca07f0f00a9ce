#if canImport(Glibc)
    import Glibc
#endif

#if canImport(Glibc)
    // At most two malloc arenas (glibc's default is 8 per core, one per thread that allocates): the
    // loop thread and the cooperative pool's threads would otherwise each keep their own arena's
    // free memory resident after a burst (BENCHMARKS.md, resident memory). Before any thread starts.
    // `mallopt` is in <malloc.h>, which the Glibc module does not export; M_ARENA_MAX is -8.
    if let symbol = dlsym(nil, "mallopt") {
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        _ = unsafeBitCast(symbol, to: Mallopt.self)(-8, 2)
    }
#endif

/// Every subcommand, in the order `gattway --help` lists them.
func allCommands() -> [any Command.Type] {
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

// The tool runs as a task while the main thread only waits. With an `await` here, main would be
// async and end in dispatch_main(), whose pthread_exit() unwinds the main thread's stack: the
// unwinder's lookups touch most of the binary's .eh_frame_hdr and parts of .eh_frame, ~0.5 MB that
// then stays resident in every process (BENCHMARKS.md, session 4). Nothing here uses the main
// queue or the main actor.
Task.detached {
    exit(await CommandLineTool(commands: allCommands()).main(Array(CommandLine.arguments.dropFirst())).rawValue)
}
while true { pause() }
