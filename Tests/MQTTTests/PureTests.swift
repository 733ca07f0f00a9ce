import MQTT
import Retry
import Testing

@Suite("MQTT values")
struct PureTests {
    @Test(
        "topic filters match topics as MQTT 5 §4.7 says",
        arguments: [
            ("a/b", "a/b", true), ("a/b", "a/c", false), ("a/+", "a/b", true), ("a/+", "a/b/c", false),
            ("a/#", "a", true), ("a/#", "a/b/c", true), ("#", "a/b", true), ("+/+", "a/b", true),
            ("+", "/", false), ("+/+", "/", true), ("#", "$SYS/broker", false), ("$SYS/#", "$SYS/broker", true),
            ("a/+/c", "a//c", true),
        ])
    func filterMatches(filter: String, topic: String, expected: Bool) throws {
        #expect(try MQTTTopicFilter(filter).matches(topic) == expected)
    }

    @Test("invalid topic filters are rejected with the reason", arguments: ["", "a/#/b", "a#", "a/b+", "$share/g/a"])
    func invalidFilters(filter: String) {
        #expect(throws: MQTTError.self) { try MQTTTopicFilter(filter) }
        do {
            _ = try MQTTTopicFilter(filter)
        } catch {
            #expect(error.kind == .invalidArgument)
            #expect(error.description.contains("topic filter"))
        }
    }

    @Test("broker URLs give host, port, TLS and credentials")
    func urls() throws {
        let plain = try MQTTConfiguration(url: "mqtt://broker.local", clientID: "c")
        #expect(plain.host == "broker.local" && plain.port == 1883 && plain.tls == nil)
        let secure = try MQTTConfiguration(url: "mqtts://10.0.0.2", clientID: "c")
        #expect(secure.port == 8883 && secure.tls != nil)
        let v6 = try MQTTConfiguration(url: "mqtt://user:pw@[::1]:1999", clientID: "c")
        #expect(
            v6.host == "::1" && v6.port == 1999 && v6.credentials == MQTTCredentials(username: "user", password: "pw"))
        for bad in ["http://x", "mqtt://", "mqtt://host:0", "mqtt://host:99999", "mqtt://h/path"] {
            #expect(throws: MQTTError.self, "\(bad)") { try MQTTConfiguration(url: bad, clientID: "c") }
        }
    }

    @Test("configurations that cannot work are refused before connecting")
    func invalidConfiguration() throws {
        var configuration = try MQTTConfiguration(url: "mqtt://h", clientID: "")
        configuration.cleanSession = false
        #expect(throws: MQTTError.self) { try MQTTClient(configuration: configuration, loop: .init()) }
        configuration = try MQTTConfiguration(url: "mqtt://h", clientID: "c")
        configuration.keepAlive = 3
        #expect(throws: MQTTError.self) { try MQTTClient(configuration: configuration, loop: .init()) }
        configuration = try MQTTConfiguration(url: "mqtt://h", clientID: "c")
        configuration.protocolVersion = .v311
        configuration.sessionExpiryInterval = 60
        #expect(throws: MQTTError.self) { try MQTTClient(configuration: configuration, loop: .init()) }
    }

    @Test("the reconnect policy is the shared backoff: the minimum first, doubling to the maximum")
    func backoff() {
        var backoff = ExponentialBackoff(
            MQTTReconnectPolicy(minimumDelay: 1, maximumDelay: 10, multiplier: 2, jitter: 0).backoff)
        #expect((0..<6).map { _ in backoff.next(random: 0.5) } == [1, 2, 4, 8, 10, 10])
        #expect(!MQTTReconnectPolicy(minimumDelay: 0, maximumDelay: 10).backoff.isValid)
    }

    @Test("3.1.1 CONNACK codes map to MQTT 5 reason codes with libmosquitto's text")
    func reasonCodes() {
        #expect(MQTTReasonCode(connackV311: 5) == .notAuthorized)
        #expect(MQTTReasonCode(connackV311: 4) == .badUsernameOrPassword)
        #expect(MQTTReasonCode.notAuthorized.description == "Not authorized")
    }
}
