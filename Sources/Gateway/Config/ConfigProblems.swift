import Bluetooth
import JSON

/// Collects every problem found while reading config.json, so one run reports them all.
final class ConfigProblems {
    private(set) var errors: [JSONPathError] = []

    func add(_ path: String, _ message: String) {
        errors.append(JSONPathError(path: path, message: message))
    }

    func add(_ error: any Error) {
        if let error = error as? JSONPathError {
            errors.append(error)
        } else {
            errors.append(JSONPathError(path: "", message: "\(error)"))
        }
    }

    /// Runs `body`; a thrown error is recorded and nil returned.
    func attempt<T>(_ body: () throws -> T) -> T? {
        do {
            return try body()
        } catch {
            add(error)
            return nil
        }
    }
}
