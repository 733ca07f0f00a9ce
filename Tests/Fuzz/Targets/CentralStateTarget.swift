import BlueZ
import JSON

extension FuzzTargets {
    /// The central's state file (`central.json` in the state directory), which anything that
    /// can write there — or a torn write, a full disk — may leave in any shape: it parses or
    /// fails with an error naming the JSON path, and what parses writes back to an equal file.
    static let centralState = FuzzTarget(
        name: "central-state",
        summary: "the central's state file (central.json) through CentralStateFile",
        seeds: {
            [
                #"{"version":1,"devices":[{"address":"A4:C1:38:00:00:01","name":"Battery","connect":true}],"subscriptions":[{"address":"A4:C1:38:00:00:01","service":"180F","characteristic":"2A19","path":"service000a/char000b"}]}"#,
                #"{"version":1,"devices":[],"subscriptions":[{"address":"A4:C1:38:00:00:02","service":"181A","characteristic":"2A6E"}]}"#,
                #"{"devices":[{"address":"aa-bb-cc-dd-ee-ff"}]}"#,
            ].map { Array($0.utf8) }
        },
        run: { bytes in
            guard let file = try? CentralStateFile(json: bytes) else { return }
            var text: [UInt8] = []
            file.json.write(into: &text)
            let again = try? CentralStateFile(json: text)
            fuzzProperty(
                again == file, "the state file does not read back as written: \(String(decoding: text, as: UTF8.self))")
        })
}
