import Gateway
import Testing

@Suite("config.json: bluetooth.adapters")
struct AdapterConfigTests {
    private func adapters(_ bluetooth: String) throws -> [String] {
        try GatewayConfig.parse(Array(#"{"bluetooth": \#(bluetooth)}"#.utf8)).bluetooth.adapters
    }

    private func problems(_ bluetooth: String) -> [String] {
        do {
            _ = try GatewayConfig.parse(Array(#"{"bluetooth": \#(bluetooth)}"#.utf8))
            return []
        } catch {
            return error.lines
        }
    }

    @Test("without either key the gateway uses hci0; adapter names one, adapters several in order")
    func accepted() throws {
        #expect(try adapters("{}") == ["hci0"])
        #expect(try adapters(#"{"adapter": "hci1"}"#) == ["hci1"])
        #expect(try adapters(#"{"adapters": ["hci2", "hci0"]}"#) == ["hci2", "hci0"])
        let config = try GatewayConfig.parse(
            Array(#"{"bluetooth": {"adapters": ["hci2", "hci0"], "max_connections": 2}}"#.utf8))
        #expect(config.bluetooth.adapter == "hci2")
        #expect(config.bluetooth.totalConnections == 4)
    }

    @Test(
        "both keys, an empty list, a name twice, a bad name and too long a list are refused with their path",
        arguments: [
            (#"{"adapter": "hci0", "adapters": ["hci0", "hci1"]}"#, "bluetooth.adapter: and adapters are both set"),
            (#"{"adapters": []}"#, "bluetooth.adapters: is empty"),
            (#"{"adapters": ["hci0", "hci1", "hci0"]}"#, "bluetooth.adapters[2]: \"hci0\" is listed twice"),
            (#"{"adapters": ["hci0", "usb0"]}"#, "bluetooth.adapters[1]: \"usb0\" is not an adapter name"),
            (#"{"adapters": "hci0"}"#, "bluetooth.adapters: expected an array"),
            (
                #"{"adapters": ["hci0","hci1","hci2","hci3","hci4","hci5","hci6","hci7","hci8"]}"#,
                "bluetooth.adapters: has 9 adapters (at most 8)"
            ),
        ])
    func refused(bluetooth: String, message: String) {
        let lines = problems(bluetooth)
        #expect(lines.contains { $0.hasPrefix(message) }, "\(lines)")
    }
}
