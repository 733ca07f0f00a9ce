import Gateway
import Testing

@testable import GatewayRuntime

@Suite("The event stream's gathered messages: the latest per device topic, in first-come order")
struct PendingEventsTests {
    static func pending() -> PendingEvents {
        PendingEvents(base: Array("gattway/".utf8), bridge: Array("gattway/bridge".utf8))
    }

    static func message(_ topic: String, _ payload: String) -> MQTTOutboundMessage {
        MQTTOutboundMessage(topic: topic, payload: Array(payload.utf8), qos: 0, retain: false)
    }

    static func events(_ pending: PendingEvents) -> String {
        var bytes: [UInt8] = []
        for message in pending.messages {
            WebSite.writeEvent(message, base: pending.base, bridge: pending.bridge, into: &bytes)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test("a topic's later message replaces its earlier one in place; new topics join the end")
    func latestInOrder() {
        var pending = Self.pending()
        let kept = [
            pending.keep(Self.message("gattway/a", #"{"t":1}"#)),
            pending.keep(Self.message("gattway/b", #"{"t":2}"#)),
            pending.keep(Self.message("gattway/a/availability", "online")),
            pending.keep(Self.message("gattway/a", #"{"t":3}"#)),
        ]
        #expect(kept == [true, true, true, true])
        #expect(pending.messages.map(\.topic) == ["gattway/a", "gattway/b", "gattway/a/availability"])
        #expect(
            pending.messages.map { String(decoding: $0.payload, as: UTF8.self) } == [
                #"{"t":3}"#, #"{"t":2}"#, "online",
            ])
        #expect(
            Self.events(pending)
                == "event: reading\ndata: {\"device\":\"a\",\"payload\":{\"t\":3}}\n\n"
                + "event: reading\ndata: {\"device\":\"b\",\"payload\":{\"t\":2}}\n\n"
                + "event: availability\ndata: {\"device\":\"a\",\"payload\":\"online\"}\n\n")
    }

    @Test("what is no event is not kept: bridge topics, attribute topics, other prefixes, the base alone")
    func onlyEventTopics() {
        var pending = Self.pending()
        for topic in [
            "gattway/bridge/health", "gattway/bridge", "gattway/bridgeX", "gattway/a/temperature",
            "gattway/presence/phone",
            "gattway/", "gattway", "other/a", "gattway//availability", "gattway/a/availabilityx",
            "gattway/a/b/availability",
        ] {
            let kept = pending.keep(Self.message(topic, "{}"))
            #expect(!kept, "\(topic)")
        }
        #expect(pending.isEmpty)
    }

    @Test(
        "many topics: every one kept once with its latest message (the table grows), and emptied for the next interval")
    func manyTopics() {
        var pending = Self.pending()
        for round in 0..<3 {
            for index in 0..<1000 {
                pending.keep(Self.message("gattway/device\(index)", #"{"round":\#(round)}"#))
            }
        }
        #expect(pending.messages.count == 1000)
        #expect(pending.messages.map(\.topic) == (0..<1000).map { "gattway/device\($0)" })
        #expect(pending.messages.allSatisfy { $0.payload == Array(#"{"round":2}"#.utf8) })
        pending.removeAll()
        #expect(pending.isEmpty)
        pending.keep(Self.message("gattway/device7", "{}"))
        pending.keep(Self.message("gattway/device7", #"{"x":1}"#))
        #expect(pending.messages.map(\.topic) == ["gattway/device7"])
    }

    @Test("topics of non-ASCII names and of equal hashes' neighbours stay apart")
    func distinctTopics() {
        var pending = Self.pending()
        pending.keep(Self.message("gattway/küche", #"{"a":1}"#))
        pending.keep(Self.message("gattway/kuche", #"{"a":2}"#))
        pending.keep(Self.message("gattway/küche", #"{"a":3}"#))
        #expect(pending.messages.map(\.topic) == ["gattway/küche", "gattway/kuche"])
        #expect(pending.messages.first?.payload == Array(#"{"a":3}"#.utf8))
    }
}
