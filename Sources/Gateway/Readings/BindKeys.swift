import Bluetooth
import JSON

/// Bind keys set at run time (`bridge/request/device/bindkey`), by device address: kept in
/// `bindkeys.json` in the state directory (mode 0600, rewritten atomically on every change,
/// read at start), or in memory only without a state directory. A key of config.json
/// (`devices[].bindkey`) wins over these. Loop-confined.
///
/// The file: `{"bindkeys":{"54:48:E6:8F:80:A5":"231d39c1d7cc1ab1aee224cd096db932",…}}`. It is
/// never trusted: one that does not parse, is larger than ``maxFileBytes`` or is not an object
/// is ignored (with a warning) and replaced at the next change; an entry that is not an address
/// with 32 hex digits is skipped; beyond ``maxKeys`` entries the rest is skipped.
package final class BindKeys {
    /// The file name in the state directory.
    package static let fileName = Gateway.bindKeysFileName
    /// Most runtime keys kept (a request for one more device is refused).
    package static let maxKeys = 1000
    /// Largest file read at start (``maxKeys`` entries take about 70 kB).
    package static let maxFileBytes = 256 * 1024
    /// The file, nil: memory only.
    var path: String? { file.path }
    private var file: RuntimeFile
    private var keys: [BluetoothAddress: [UInt8]] = [:]

    package init(directory: String?) {
        file = RuntimeFile(directory: directory, name: Self.fileName, holds: "bind keys", maxBytes: Self.maxFileBytes)
    }

    package var count: Int { keys.count }

    /// The runtime keys by address (the fuzz target compares a file read back with these).
    package var all: [BluetoothAddress: [UInt8]] { keys }

    /// The runtime key of the device, nil when none was set (the hot path: one dictionary
    /// look-up only when there are keys at all).
    package func key(_ address: BluetoothAddress) -> [UInt8]? {
        keys.isEmpty ? nil : keys[address]
    }

    /// Reads the file (at start); the problems to report, each without key material. A
    /// missing file is no problem.
    package func load() -> [String] {
        let (contents, read) = file.read()
        guard let bytes = contents, let path = file.path else { return read }
        var problems = read
        guard let document = try? JSONValue.parse(bytes), case .object(let entries)? = document["bindkeys"] else {
            return problems + [
                "\(path) is not a bind key file ({\"bindkeys\":{address: key}}): ignored (runtime bind keys start empty; it is replaced at the next change)"
            ]
        }
        var skipped = 0
        for (text, value) in entries {
            guard keys.count < Self.maxKeys, let address = BluetoothAddress(text), case .string(let hex) = value,
                let key = Self.key(hex)
            else {
                skipped += 1
                continue
            }
            keys[address] = key
        }
        if skipped > 0 {
            problems.append(
                "\(path): \(skipped) entr\(skipped == 1 ? "y" : "ies") skipped (not an address with 32 hex digits, or beyond \(Self.maxKeys) keys)"
            )
        }
        return problems
    }

    /// Sets (nil: clears) the device's key, writing the file first when there is one: when
    /// that fails, or the file was rewritten too often of late (``RuntimeFile/writeBurst``), nothing changes
    /// and the error says why. True when the change is in the file, false when it is in memory
    /// only.
    package func set(_ address: BluetoothAddress, _ key: [UInt8]?, now: Double) -> Result<Bool, CommandError> {
        var next = keys
        next[address] = key
        if key != nil, keys[address] == nil, keys.count >= Self.maxKeys {
            return .failure(CommandError("at most \(Self.maxKeys) runtime bind keys are kept; clear one first"))
        }
        guard file.path != nil else {
            keys = next
            return .success(false)
        }
        if next != keys {
            if let error = file.write(Self.encode(next), now: now, unchanged: "the key is unchanged") {
                return .failure(error)
            }
            keys = next
        }
        return .success(true)
    }

    /// A key as the request and the file give it: 32 hex digits (separators ` `, `:`, `-` allowed,
    /// as in config.json), 16 bytes.
    static func key(_ text: String) -> [UInt8]? {
        guard text.utf8.count <= 128, let bytes = Hex.decode(text), bytes.count == 16 else { return nil }
        return bytes
    }

    private static func encode(_ keys: [BluetoothAddress: [UInt8]]) -> [UInt8] {
        let entries = keys.sorted { $0.key.rawValue < $1.key.rawValue }.map {
            (key: $0.key.description, value: JSONValue.string(Hex.encode($0.value)))
        }
        var bytes: [UInt8] = []
        JSONValue.object([("bindkeys", .object(entries))]).write(into: &bytes)
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }
}
