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

    /// The repository's root (seeds also come from config.json, docs/ and the test sources).
    public static let repository: String = {
        var path = directory
        for _ in 0..<2 {  // Tests/Fixtures → the root
            if let slash = path.lastIndex(of: "/") { path = String(path[..<slash]) }
        }
        return path
    }()

    /// A file of the repository by its path from the root (`config.json`, `docs/config.md`).
    public static func repositoryFile(_ relativePath: String) -> [UInt8]? {
        LocalFile.read(repository + "/" + relativePath)
    }

    /// The files of a repository folder whose names end with `suffix`, as paths from the root, sorted.
    public static func repositoryFiles(in folder: String, suffix: String) -> [String] {
        (LocalFile.contentsOfDirectory(repository + "/" + folder) ?? []).filter { $0.hasSuffix(suffix) }.sorted()
            .map { folder + "/" + $0 }
    }

    /// The bodies of the ```json code blocks of a Markdown file of the repository.
    public static func markdownJSONBlocks(_ relativePath: String) -> [[UInt8]] {
        guard let bytes = repositoryFile(relativePath) else { return [] }
        var blocks: [[UInt8]] = []
        var current: [String]?
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.drop { $0 == " " }
            if current == nil, trimmed.hasPrefix("```json") {
                current = []
            } else if let lines = current, trimmed.hasPrefix("```") {
                blocks.append(Array(lines.joined(separator: "\n").utf8))
                current = nil
            } else if current != nil {
                current!.append(String(line))
            }
        }
        return blocks
    }

    /// The multi-line string literals (`"""` … `"""`) of a Swift file of the repository whose
    /// text starts with `{`: the JSON documents tests write inline. Interpolations stay as written.
    public static func swiftJSONLiterals(_ relativePath: String) -> [[UInt8]] {
        guard let bytes = repositoryFile(relativePath) else { return [] }
        var literals: [[UInt8]] = []
        var current: [String]?
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
            let quotes = occurrences(of: "\"\"\"", in: line)
            if current == nil, quotes == 1, line.hasSuffix("\"\"\"") {
                current = []
            } else if let lines = current, quotes == 1 {
                let text = lines.joined(separator: "\n")
                if text.drop(while: { $0 == " " || $0 == "\n" }).hasPrefix("{") { literals.append(Array(text.utf8)) }
                current = nil
            } else if current != nil {
                current!.append(String(line))
            }
        }
        return literals
    }

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

    /// How many times `needle` occurs in `text`, not overlapping.
    private static func occurrences(of needle: String, in text: Substring) -> Int {
        var count = 0
        var rest = text
        while let range = rest.firstRange(of: needle) {
            count += 1
            rest = rest[range.upperBound...]
        }
        return count
    }
}
