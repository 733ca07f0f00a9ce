import Foundation

/// A small file system mounted for one test, so it can fill up, turn read-only and come back:
/// a tmpfs of a given size, or ext4 in an image file on a loop device (whose `errors=remount-ro`
/// lets a test make it read-only under files open for writing, as an SD card with I/O errors
/// does; a tmpfs refuses to go read-only while a file is open for writing). Unmounted (lazily)
/// and removed when the value is released.
///
/// Mounting needs root (CAP_SYS_ADMIN), as `make test` has on CI; tests that need one are
/// enabled by ``runsTmpfsTests`` / ``runsExt4Tests`` and say why they were skipped. With
/// `GATTWAY_REQUIRE_MOUNT=1` in the environment (`.ci/run` sets it) they are never skipped: a
/// machine that cannot mount fails them, with the reason.
public final class ScratchFileSystem: @unchecked Sendable {
    // Invariant for @unchecked Sendable: every stored property is immutable.
    /// The mount point.
    public let path: String
    private let image: String?
    private let base: URL

    /// Why no tmpfs can be mounted here (nil when it can): tried once per process.
    public static let unavailable: String? = {
        do {
            _ = try ScratchFileSystem(tmpfsBytes: 64 * 1024)
            return nil
        } catch {
            return "cannot mount a tmpfs (\(error)); run the tests as root to include this test"
        }
    }()

    /// `GATTWAY_REQUIRE_MOUNT=1`: the tests that mount must run (CI), not be skipped.
    public static let required = ProcessInfo.processInfo.environment["GATTWAY_REQUIRE_MOUNT"] == "1"

    /// Whether a test that mounts a tmpfs runs: one can be mounted here, or it must
    /// (``required``; the test then fails on the mount, saying why).
    public static var runsTmpfsTests: Bool { unavailable == nil || required }

    /// Whether a test that mounts ext4 on a loop device runs (as ``runsTmpfsTests``).
    public static var runsExt4Tests: Bool { ext4Unavailable == nil || required }

    /// Why no ext4 image can be mounted on a loop device here (nil when it can).
    public static let ext4Unavailable: String? = {
        if let unavailable { return unavailable }
        guard FileManager.default.fileExists(atPath: "/dev/loop-control") else {
            return "no loop devices (/dev/loop-control)"
        }
        guard (try? ChildProcess.resolve("mkfs.ext4")) != nil else { return "mkfs.ext4 is not installed (e2fsprogs)" }
        guard (try? ChildProcess.resolve("mount")) != nil else { return "mount is not installed (mount)" }
        return nil
    }()

    /// Mounts a tmpfs of `tmpfsBytes` (rounded up to whole pages by the kernel), empty,
    /// read-write or read-only.
    public init(tmpfsBytes: Int, readOnly: Bool = false) throws {
        base = try TemporaryDirectory.make(prefix: "scratch-fs")
        path = base.appendingPathComponent("mnt").path
        image = nil
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let flags = readOnly ? UInt(MS_RDONLY) : 0
        guard mount("tmpfs", path, "tmpfs", flags, "size=\(tmpfsBytes),mode=0755") == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: base)
            throw ChildProcessError("mount -t tmpfs \(path): \(reason)")
        }
    }

    /// Makes an ext4 file system of `ext4Bytes` in an image file and mounts it through a loop
    /// device with `errors=remount-ro`.
    public init(ext4Bytes: Int) async throws {
        if let reason = Self.ext4Unavailable { throw ChildProcessError("cannot mount ext4: \(reason)") }
        base = try TemporaryDirectory.make(prefix: "scratch-ext4")
        path = base.appendingPathComponent("mnt").path
        let image = base.appendingPathComponent("fs.img").path
        self.image = image
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: image, contents: nil), truncate(image, off_t(ext4Bytes)) == 0
        else {
            throw ChildProcessError("cannot create the image \(image): \(String(cString: strerror(errno)))")
        }
        let made = try await ChildProcess.run("mkfs.ext4", ["-q", "-F", image])
        guard made.status == 0 else { throw ChildProcessError("mkfs.ext4 \(image) failed: \(made.output)") }
        let mounted = try await ChildProcess.run("mount", ["-o", "loop,errors=remount-ro", image, path])
        guard mounted.status == 0 else { throw ChildProcessError("mount -o loop \(image) failed: \(mounted.output)") }
    }

    deinit {
        // Lazily: a gateway under test may still hold a file there; the kernel finishes the
        // unmount (and frees the loop device, mount -o loop sets autoclear) when it lets go.
        _ = umount2(path, Int32(MNT_DETACH))
        try? FileManager.default.removeItem(at: base)
    }

    /// Remounts read-only or read-write. A tmpfs cannot go read-only while a file on it is open
    /// for writing (EBUSY).
    public func remount(readOnly: Bool) throws {
        let flags = UInt(MS_REMOUNT) | (readOnly ? UInt(MS_RDONLY) : 0)
        guard mount("none", path, nil, flags, nil) == 0 else {
            throw ChildProcessError("remount \(readOnly ? "ro" : "rw") \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Fills the file system with a file of zeros until it is full (ENOSPC); returns its path.
    /// Delete it to free the space.
    @discardableResult
    public func fill(name: String = "filler") throws -> String {
        let filler = path + "/" + name
        let fd = open(filler, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ChildProcessError("cannot create \(filler): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let block = [UInt8](repeating: 0, count: 4096)
        while true {
            let written = block.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written > 0 { continue }
            if written < 0, errno == EINTR { continue }
            if written < 0, errno == ENOSPC { return filler }
            throw ChildProcessError("filling \(filler): \(String(cString: strerror(errno)))")
        }
    }

    /// ext4 only: an error as the file system would record on a failed I/O
    /// (`/sys/fs/ext4/<device>/trigger_fs_error`); with `errors=remount-ro` the file system is
    /// read-only from now on, also for files already open for writing (EROFS).
    public func triggerError() throws {
        guard image != nil else { throw ChildProcessError("triggerError needs the ext4 scratch file system") }
        let mounts = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
        guard
            let line = mounts.split(separator: "\n").first(where: {
                $0.split(separator: " ").dropFirst().first.map(String.init) == path
            }),
            let device = line.split(separator: " ").first?.split(separator: "/").last
        else { throw ChildProcessError("\(path) is not in /proc/self/mounts") }
        let trigger = "/sys/fs/ext4/\(device)/trigger_fs_error"
        do {
            try "gattway test\n".write(toFile: trigger, atomically: false, encoding: .utf8)
        } catch {
            throw ChildProcessError("cannot write \(trigger): \(error)")
        }
    }
}
