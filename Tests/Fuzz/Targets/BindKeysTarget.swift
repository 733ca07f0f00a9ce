import Bluetooth
import Gateway
import Glibc
import LocalSystem
import Synchronization

extension FuzzTargets {
    /// Arbitrary bytes as `bindkeys.json` in the state directory (the bind keys set at run time),
    /// read by ``BindKeys/load()`` at start: what a torn write, a full disk, a hand edit or
    /// anything else that can write there leaves.
    ///
    /// Properties: no trap, no hang; at most ``BindKeys/maxKeys`` keys, each of 16 bytes; no problem reported quotes a key (the file holds secrets
    /// and the problems go to the log); and after one change (a key set for a device, as the
    /// MQTT request does) the file the gateway wrote reads back, with no problem, to exactly the
    /// keys it holds.
    static let bindKeys = FuzzTarget(
        name: "bindkeys",
        summary: "arbitrary bytes as the runtime bind key file (bindkeys.json): load, set one key, read back",
        seeds: {
            [
                #"{"bindkeys":{"54:48:E6:8F:80:A5":"231d39c1d7cc1ab1aee224cd096db932"}}"#,
                #"{"bindkeys":{"A4:C1:38:00:00:01":"23 1d 39 c1 d7 cc 1a b1 ae e2 24 cd 09 6d b9 32","A4:C1:38:00:00:02":"00112233445566778899aabbccddeeff"}}"#,
                #"{"bindkeys":{"not an address":"231d39c1d7cc1ab1aee224cd096db932","54:48:E6:8F:80:A5":"short"}}"#,
                #"{"bindkeys":[]}"#,
                "[1,2,3]",
                "",
            ].map { Array($0.utf8) }
        },
        run: { bytes in
            BindKeyFiles.with(bytes, as: BindKeys.fileName) { directory in
                let path = directory + "/" + BindKeys.fileName
                let keys = BindKeys(directory: directory)
                let problems = keys.load()
                fuzzProperty(keys.count <= BindKeys.maxKeys, "\(keys.count) keys loaded, more than \(BindKeys.maxKeys)")
                for (address, key) in keys.all {
                    fuzzProperty(key.count == 16, "a key of \(key.count) bytes loaded for \(address)")
                    let hex = Hex.encode(key)
                    for problem in problems {
                        fuzzProperty(
                            !problem.lowercased().contains(hex), "a problem quotes a loaded key: \(problem)")
                    }
                }
                // One change, as `bridge/request/device/bindkey` makes it: the file is rewritten.
                let device =
                    keys.all.keys.min { $0.rawValue < $1.rawValue } ?? BluetoothAddress(rawValue: 0x5448_E68F_80A5)
                let newKey = [UInt8](repeating: bytes.first ?? 0x42, count: 16)
                guard case .success(true) = keys.set(device, newKey, now: 0) else {
                    // Only at the key limit (a new device) or when the directory cannot be written.
                    fuzzProperty(
                        keys.count >= BindKeys.maxKeys || !LocalFile.exists(path),
                        "setting a key failed below the limit with the file in place")
                    return
                }
                fuzzProperty(keys.key(device) == newKey, "the key set is not the key held")
                let again = BindKeys(directory: directory)
                let reread = again.load()
                fuzzProperty(reread.isEmpty, "the file the gateway wrote reads back with problems: \(reread)")
                fuzzProperty(again.all == keys.all, "the file the gateway wrote reads back to other keys")
            }
        })
}

/// A directory per input under the fuzz targets' temporary directory: inputs run at once in one
/// process, and the bind key file's name is fixed.
enum BindKeyFiles {
    private static let inputs = Atomic<Int>(0)

    /// Writes `bytes` as `name` in a new directory and runs `body` with the directory, then
    /// removes the file, its temporary sibling and the directory (nothing runs when the file
    /// cannot be written).
    static func with(_ bytes: [UInt8], as name: String, _ body: (String) -> Void) {
        let directory = newDirectory()
        let path = directory + "/" + name
        defer {
            unlink(path)
            unlink(path + ".tmp")
            rmdir(directory)
        }
        guard QueueFileRecords.write(bytes, to: path) else { return }
        body(directory)
    }

    static func newDirectory() -> String {
        let path = QueueFileRecords.directory + "/bindkeys-\(inputs.add(1, ordering: .relaxed).newValue)"
        mkdir(path, 0o700)
        return path
    }
}
