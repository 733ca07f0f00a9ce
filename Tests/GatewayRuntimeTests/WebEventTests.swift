import Gateway
import Testing

@testable import GatewayRuntime

@Suite("The event stream's events as written")
struct WebEventTests {
    static func written(_ events: [DeviceEvent]) -> String {
        var bytes: [UInt8] = []
        for event in events { WebSite.writeEvent(event, into: &bytes) }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test("a state as the core's JSON, an availability and a cleared message as JSON or strings, names escaped")
    func events() {
        let text = Self.written([
            DeviceEvent(device: "a", availability: false, payload: Array(#"{"t":3}"#.utf8)),
            DeviceEvent(device: "a", availability: true, payload: Array(#"{"state":"online"}"#.utf8)),
            DeviceEvent(device: "kü\"che", availability: false, payload: []),
            DeviceEvent(device: "b", availability: true, payload: Array("off\nline".utf8)),
        ])
        #expect(
            text
                == "event: reading\ndata: {\"device\":\"a\",\"payload\":{\"t\":3}}\n\n"
                + "event: availability\ndata: {\"device\":\"a\",\"payload\":{\"state\":\"online\"}}\n\n"
                + "event: reading\ndata: {\"device\":\"kü\\\"che\",\"payload\":\"\"}\n\n"
                + "event: availability\ndata: {\"device\":\"b\",\"payload\":\"off\\nline\"}\n\n")
    }
}
