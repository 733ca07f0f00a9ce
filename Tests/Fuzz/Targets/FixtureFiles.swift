import LocalSystem

/// The repository's `Tests/Fixtures`, found from this file's path (the tests and the fuzzer run
/// from a checkout).
public enum FixtureFiles {
    public static let directory: String = {
        var path = String(#filePath)
        for _ in 0..<3 {  // Tests/Fuzz/Targets/FixtureFiles.swift → Tests
            if let slash = path.lastIndex(of: "/") { path = String(path[..<slash]) }
        }
        return path + "/Fixtures"
    }()

    /// The lines of a `.jsonl` fixture file.
    public static func lines(_ name: String) -> [String] {
        guard let bytes = LocalFile.read(directory + "/" + name) else { return [] }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// The folder of one target's saved inputs: crashers found (and fixed) and hand-made inputs
    /// that reach deep code; the tests replay every file in it.
    public static func corpusDirectory(_ target: String) -> String { directory + "/fuzz/" + target }

    /// The files of a target's corpus folder, sorted by name.
    public static func corpus(_ target: String) -> [(name: String, bytes: [UInt8])] {
        let folder = corpusDirectory(target)
        guard let names = LocalFile.contentsOfDirectory(folder) else { return [] }
        return names.sorted().compactMap { name in
            guard !name.hasPrefix("."), let bytes = LocalFile.read(folder + "/" + name) else { return nil }
            return (name, bytes)
        }
    }
}
