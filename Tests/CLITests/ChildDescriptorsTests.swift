import Glibc
import TestSupport
import Testing

/// What a daemon started by `gattway demo` or a test inherits: only its standard descriptors.
@Suite("Spawned daemons inherit no descriptors")
struct ChildDescriptorsTests {
    @Test("a descriptor left open without close-on-exec does not reach the child")
    func onlyStandardDescriptors() async throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)  // no O_CLOEXEC: what a careless library would leave open
        defer { ends.forEach { close($0) } }
        // `; true` keeps the shell from exec'ing ls, so the listing is the shell's own table.
        let (status, output) = try await ChildProcess.run("/bin/sh", ["-c", "ls /proc/$$/fd; true"])
        #expect(status == 0)
        let listed = output.split(separator: "\n").map(String.init)
        #expect(listed == ["0", "1", "2"], "the child's descriptors: \(listed); the pipe was \(ends)")
    }
}
