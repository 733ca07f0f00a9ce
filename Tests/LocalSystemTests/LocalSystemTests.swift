import Foundation
import LocalSystem
import Testing

/// LocalFile against real files in a fresh temporary directory; the expectations are
/// cross-checked with Foundation's own file calls where one exists.
@Suite("Local files, environment and wall clock")
struct LocalSystemTests {
    let root: String

    init() throws {
        root = NSTemporaryDirectory() + "localsystem-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    @Test("a written file reads back byte for byte, with no temporary file left and the mode asked for")
    func writeAndRead() throws {
        defer { LocalFile.removeTree(root) }
        let path = root + "/data.bin"
        let bytes = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try LocalFile.write(bytes, to: path, mode: 0o600)
        #expect(LocalFile.read(path) == bytes)
        #expect(FileManager.default.contents(atPath: path).map { [UInt8]($0) } == bytes)
        #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
        #expect(LocalFile.permissions(path)?.mode == 0o600)
        try LocalFile.write("héllo\n", to: path)
        #expect(LocalFile.readText(path) == "héllo\n")
    }

    @Test(
        "reading a missing file or a directory gives nil, or an error naming the file and the reason; writing into a missing directory says which"
    )
    func failures() throws {
        defer { LocalFile.removeTree(root) }
        #expect(LocalFile.read(root + "/missing") == nil)
        #expect(LocalFile.read(root) == nil)
        let missing = #expect(throws: LocalFileError.self) { try LocalFile.contents(root + "/missing") }
        #expect(missing?.description == "cannot read \(root)/missing: No such file or directory")
        let directory = #expect(throws: LocalFileError.self) { try LocalFile.contents(root) }
        #expect(directory?.description == "cannot read \(root): Is a directory")
        try LocalFile.write([1, 2, 3], to: root + "/three")
        #expect(try LocalFile.contents(root + "/three") == [1, 2, 3])
        #expect(throws: LocalFileError.self) { try LocalFile.write("x", to: root + "/no/such/file") }
        do {
            try LocalFile.write("x", to: root + "/no/such/file")
        } catch {
            #expect(error.description.contains("no/such/file"))
        }
    }

    @Test("createDirectories makes every missing parent, accepts an existing one and refuses a file in the way")
    func directories() throws {
        defer { LocalFile.removeTree(root) }
        let nested = root + "/a/b/c"
        try LocalFile.createDirectories(nested)
        #expect(LocalFile.isDirectory(nested))
        try LocalFile.createDirectories(nested)
        try LocalFile.createDirectories(nested + "/")
        try LocalFile.write("x", to: root + "/file")
        #expect(throws: LocalFileError.self) { try LocalFile.createDirectories(root + "/file/d") }
        #expect(throws: LocalFileError.self) { try LocalFile.createDirectories(root + "/file") }
        let relative = "localsystem-relative-\(getpid())/x"
        try LocalFile.createDirectories(relative)
        #expect(LocalFile.isDirectory(relative))
        LocalFile.removeTree("localsystem-relative-\(getpid())")
        #expect(!LocalFile.exists(relative))
    }

    @Test("listing, links, executables and removing a tree")
    func listing() throws {
        try LocalFile.createDirectories(root + "/tree/sub")
        try LocalFile.write("1", to: root + "/tree/b")
        try LocalFile.write("2", to: root + "/tree/a")
        try LocalFile.write("3", to: root + "/tree/sub/c")
        #expect(LocalFile.contentsOfDirectory(root + "/tree") == ["a", "b", "sub"])
        #expect(LocalFile.contentsOfDirectory(root + "/missing") == nil)
        symlink("tree/a", root + "/link")
        #expect(LocalFile.symbolicLinkDestination(root + "/link") == "tree/a")
        #expect(LocalFile.symbolicLinkDestination(root + "/tree/a") == nil)
        #expect(
            LocalFile.symbolicLinkDestination("/proc/self/exe")
                == (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")))
        #expect(!LocalFile.isExecutable(root + "/tree/a"))
        chmod(root + "/tree/a", 0o755)
        #expect(LocalFile.isExecutable(root + "/tree/a"))
        #expect(!LocalFile.isExecutable(root + "/tree"))
        #expect(LocalFile.isExecutable("/bin/sh"))
        LocalFile.removeTree(root + "/link")
        #expect(LocalFile.exists(root + "/tree/a"))
        LocalFile.removeTree(root)
        #expect(!FileManager.default.fileExists(atPath: root))
    }

    @Test("the environment matches Foundation's view of it")
    func environment() {
        defer { LocalFile.removeTree(root) }
        // Read only: setenv would race with the other suites running in this process.
        let foundation = ProcessInfo.processInfo.environment
        #expect(!foundation.isEmpty)
        #expect(LocalEnvironment.all == foundation)
        #expect(LocalEnvironment.value("PATH") == foundation["PATH"])
        #expect(LocalEnvironment.value("GATTWAY_NO_SUCH_VARIABLE_\(getpid())") == nil)
    }

    @Test("the wall clock agrees with Date to within a second")
    func wallClock() {
        defer { LocalFile.removeTree(root) }
        #expect(abs(WallClock.seconds() - Date().timeIntervalSince1970) < 1)
        #expect(abs(Double(WallClock.milliseconds()) / 1000 - Date().timeIntervalSince1970) < 1)
    }
}
