import BlueZ
import GATTTree
import JSON

extension FuzzTargets {
    /// `gattway serve --tree FILE` files (docs/peripheral.md) through ``GATTTreeFile/parse(_:)``,
    /// as `gattway serve` reads them. Properties: no trap; a rejected tree is a ``JSONPathError``
    /// with a message; an accepted tree has at least one service, every service passes
    /// ``MutableService/problem`` and the read/write errors are codes an application may return.
    static let gattTree = FuzzTarget(
        name: "gatt-tree",
        summary: "gattway serve --tree files through GATTTreeFile.parse",
        seeds: { GATTTreeSeeds.all },
        run: { bytes in
            let tree: GATTTreeFile
            do {
                tree = try GATTTreeFile.parse(bytes)
            } catch let error as JSONPathError {
                fuzzProperty(!error.message.isEmpty, "a rejected tree without a message at \(error.path)")
                return
            } catch {
                fuzzProperty(false, "a tree error that names no JSON path: \(error)")
                return
            }
            fuzzProperty(!tree.services.isEmpty, "a tree with no service was accepted")
            for (service, entries) in tree.services {
                fuzzProperty(service.problem == nil, "an accepted service has a problem: \(service.problem ?? "")")
                fuzzProperty(
                    service.characteristics.count == entries.count, "service characteristics and entries differ")
                for entry in entries {
                    for error in [entry.readError, entry.writeError].compactMap({ $0 }) {
                        fuzzProperty(
                            ATTError(code: error.code) != nil, "ATT error \(error) does not round-trip its code")
                    }
                }
            }
        })
}

/// Seeds for ``FuzzTargets/gattTree``: the real-BlueZ lane's tree and docs/peripheral.md's examples.
enum GATTTreeSeeds {
    static let all: [[UInt8]] = {
        var seeds: [[UInt8]] = []
        if let bytes = FixtureFiles.repositoryFile("Tests/RealBlueZ/serve-tree.json") { seeds.append(bytes) }
        seeds += FixtureFiles.markdownJSONBlocks("docs/peripheral.md").filter {
            String(decoding: $0, as: UTF8.self).contains("\"services\"")
        }
        // The format's doc comment example, with every encoding.
        seeds.append(
            Array(
                #"""
                {"name": "gattway", "services": [
                  {"uuid": "180F", "characteristics": [
                    {"uuid": "2A19", "properties": ["read", "notify"], "value": 94, "encoding": "u8",
                     "descriptors": [{"uuid": "2901", "value": "Level"}]},
                    {"uuid": "FF01", "properties": ["write", "write-without-response"]},
                    {"uuid": "FF03", "properties": ["read"], "read_error": 128}]},
                  {"uuid": "0000ff10-0000-1000-8000-00805f9b34fb", "primary": false, "characteristics": [
                    {"uuid": "FF11", "properties": ["read", "indicate", "encrypt-read"], "value": -2.5, "encoding": "float32le"},
                    {"uuid": "FF12", "properties": ["read"], "value": "AQID", "encoding": "base64", "write_error": 3},
                    {"uuid": "FF13", "properties": ["read"], "value": {"on": true}, "encoding": "json"},
                    {"uuid": "FF14", "properties": ["read"], "value": -300, "encoding": "s16be"},
                    {"uuid": "FF15", "properties": ["read"], "value": true, "encoding": "bool"}]}]}
                """#.utf8))
        return seeds
    }()
}
