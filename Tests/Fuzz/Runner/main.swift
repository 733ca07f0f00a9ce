import CFuzzer
import FuzzTargets
import Glibc
import LocalSystem

// gattway-fuzz: runs the fuzz targets of Tests/Fuzz/Targets.
//
//   gattway-fuzz list
//   gattway-fuzz run NAME [libFuzzer options] [CORPUS_DIR…]
//   gattway-fuzz replay NAME [FILE…]
//   gattway-fuzz seeds NAME DIR
//
// Built with `-sanitize=fuzzer` (make fuzz, make test-fuzz) `run` is libFuzzer, coverage-guided,
// with its options (-seed=, -runs=, -max_total_time=, -artifact_prefix=…). In any other build it
// is the seeded mutational loop of ``Mutator``, which takes -seed=, -runs=, -max_total_time= and
// -artifact_prefix= too (libFuzzer's -fork=N and -ignore_crashes=1 work: its child processes
// find the target in GATTWAY_FUZZ_TARGET). `replay` runs the target's seeds and its fixture folder
// (Tests/Fixtures/fuzz/NAME), or the given files, and says how many inputs ran. `seeds` writes the
// target's seeds into DIR as `seed-<hash>` files (make fuzz starts libFuzzer's corpus with them).

nonisolated(unsafe) var selected: FuzzTarget?
/// The input being run, for the crash handler of the fallback loop.
nonisolated(unsafe) var current: UnsafeMutableBufferPointer<UInt8> = .allocate(capacity: 1 << 16)
nonisolated(unsafe) var currentCount = 0
nonisolated(unsafe) var crashPath: UnsafeMutablePointer<CChar>?

func complain(_ text: String) {
    _ = text.withCString { write(2, $0, strlen($0)) }
}

func usage() -> Never {
    complain("usage: gattway-fuzz list | run NAME [options] [CORPUS…] | replay NAME [FILE…] | seeds NAME DIR\n")
    exit(64)
}

func target(_ name: String) -> FuzzTarget {
    guard let target = FuzzTargets.named(name) else {
        complain("gattway-fuzz: no target \(name) (gattway-fuzz list names them)\n")
        exit(64)
    }
    return target
}

func option(_ arguments: [String], _ name: String) -> String? {
    arguments.last { $0.hasPrefix("-\(name)=") }.map { String($0.dropFirst(name.count + 2)) }
}

func monotonicSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

func fnv(_ bytes: [UInt8]) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    let digits = String(hash, radix: 16)
    return String(repeating: "0", count: 16 - digits.count) + digits
}

/// The fallback loop: seeds first, then mutations, until -runs or -max_total_time.
func mutationalRun(_ target: FuzzTarget, _ arguments: [String]) -> Int32 {
    let seed = option(arguments, "seed").flatMap { UInt64($0) } ?? 1
    let runs = option(arguments, "runs").flatMap { Int($0) } ?? Int.max
    let seconds = option(arguments, "max_total_time").flatMap { Double($0) } ?? (runs == Int.max ? 60 : .infinity)
    let prefix = option(arguments, "artifact_prefix") ?? "./"
    var seeds = target.seeds() + FixtureFiles.corpus(target.name).map(\.bytes)
    for directory in arguments where !directory.hasPrefix("-") {
        for name in LocalFile.contentsOfDirectory(directory) ?? [] {
            if let bytes = LocalFile.read(directory + "/" + name) { seeds.append(bytes) }
        }
    }
    // A trap in the target leaves through this handler: the input is saved for replay.
    signal(SIGILL, crashed)
    signal(SIGTRAP, crashed)
    signal(SIGSEGV, crashed)
    signal(SIGBUS, crashed)
    signal(SIGABRT, crashed)
    var mutator = Mutator(seed: seed)
    let start = monotonicSeconds()
    var executed = 0
    func one(_ input: [UInt8]) {
        let count = min(input.count, current.count)
        _ = current.initialize(from: input.prefix(count))
        currentCount = count
        let path = prefix + "crash-" + fnv(Array(input.prefix(count)))
        crashPath?.deallocate()
        crashPath = strdup(path)
        target.run(Array(input.prefix(count)))
        executed += 1
    }
    for input in seeds where executed < runs { one(input) }
    while executed < runs, monotonicSeconds() - start < seconds {
        one(mutator.next(from: seeds))
    }
    let elapsed = max(monotonicSeconds() - start, 1e-9)
    print("stat::number_of_executed_units: \(executed)")
    print("stat::average_exec_per_sec: \(Int(Double(executed) / elapsed))")
    print("mutational: \(target.name): \(executed) inputs in \((elapsed * 10).rounded() / 10) s, no crash")
    return 0
}

nonisolated(unsafe) let crashed: @convention(c) (Int32) -> Void = { signal in
    if let crashPath {
        let fd = open(crashPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        if fd >= 0 {
            _ = write(fd, current.baseAddress, currentCount)
            close(fd)
        }
        let note = "gattway-fuzz: crash; input saved to "
        _ = write(2, note, note.utf8.count)
        _ = write(2, crashPath, strlen(crashPath))
        _ = write(2, "\n", 1)
    }
    _exit(128 + signal)
}

var arguments = CommandLine.arguments
// libFuzzer's -fork and -merge modes run this program again with only their own options: the
// target named by the first `run` (in the environment) is meant.
if arguments.count >= 2, arguments[1].hasPrefix("-"), let name = getenv("GATTWAY_FUZZ_TARGET") {
    arguments.insert(contentsOf: ["run", String(cString: name)], at: 1)
}
guard arguments.count >= 2 else { usage() }
switch arguments[1] {
case "list":
    for target in FuzzTargets.all { print("\(target.name)\t\(target.summary)") }
case "replay":
    guard arguments.count >= 3 else { usage() }
    let target = target(arguments[2])
    var inputs: [[UInt8]] = []
    if arguments.count > 3 {
        for path in arguments[3...] {
            guard let bytes = LocalFile.read(path) else { complain("gattway-fuzz: cannot read \(path)\n"); exit(66) }
            inputs.append(bytes)
        }
    } else {
        inputs = target.seeds() + FixtureFiles.corpus(target.name).map(\.bytes)
    }
    for input in inputs { target.run(input) }
    print("replay: \(target.name): \(inputs.count) inputs, no crash")
case "seeds":
    guard arguments.count == 4 else { usage() }
    let target = target(arguments[2])
    let directory = arguments[3]
    try? LocalFile.createDirectories(directory)
    let seeds = target.seeds()
    for seed in seeds {
        do {
            try LocalFile.write(seed, to: directory + "/seed-" + fnv(seed))
        } catch {
            complain("gattway-fuzz: cannot write into \(directory): \(error)\n")
            exit(73)
        }
    }
    print("seeds: \(target.name): \(seeds.count) written to \(directory)")
case "run":
    guard arguments.count >= 3 else { usage() }
    selected = target(arguments[2])
    setenv("GATTWAY_FUZZ_TARGET", arguments[2], 1)
    let rest = Array(arguments[3...])
    guard gattway_libfuzzer_linked() != 0 else { exit(mutationalRun(selected!, rest)) }
    // libFuzzer reads its own argv: the program name, then its options and corpus folders.
    var argv: [UnsafeMutablePointer<CChar>?] = ([arguments[0]] + rest).map { strdup($0) } + [nil]
    var argc = Int32(rest.count + 1)
    let status = argv.withUnsafeMutableBufferPointer { buffer -> Int32 in
        var pointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = buffer.baseAddress
        return gattway_libfuzzer_run(&argc, &pointer) { data, size in
            let bytes = size == 0 || data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
            selected?.run(bytes)
            return 0
        }
    }
    exit(status)
default:
    usage()
}
