import GATTTree
import JSON
import LocalSystem

extension GATTTreeFile {
    /// Reads `--tree FILE`; a missing file or a JSON problem is a usage error naming the file.
    static func load(path: String) throws -> GATTTreeFile {
        guard let data = LocalFile.read(path) else { throw CLIError.usage("--tree: cannot read \(path)") }
        do {
            return try parse(JSONReader.parse(data))
        } catch let error as JSONPathError {
            throw CLIError.usage("\(path): \(error)")
        }
    }
}
