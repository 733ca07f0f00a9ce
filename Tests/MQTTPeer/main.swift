import EventLoop
import Foundation
import MQTT

// gattway-mqtt-peer: a separate MQTT client process for tests.
//
//   gattway-mqtt-peer will URL CLIENT_ID WILL_TOPIC WILL_PAYLOAD [v311|v5]
//     connects with a retained QoS 1 last will, prints "connected", then waits to be killed.

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("gattway-mqtt-peer: \(message)\n".utf8))
    exit(1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.first == "will", arguments.count >= 5 else {
    fail("usage: gattway-mqtt-peer will URL CLIENT_ID WILL_TOPIC WILL_PAYLOAD [v311|v5]")
}
do {
    var configuration = try MQTTConfiguration(url: arguments[1], clientID: arguments[2])
    configuration.keepAlive = 5
    configuration.protocolVersion = arguments.count > 5 && arguments[5] == "v311" ? .v311 : .v5
    configuration.will = MQTTMessage(topic: arguments[3], string: arguments[4], qos: .atLeastOnce, retain: true)
    let loop = EventLoop(name: "mqtt-peer")
    let client = try MQTTClient(configuration: configuration, loop: loop)
    try await client.connect()
    FileHandle.standardOutput.write(Data("connected\n".utf8))
    while true { try await Task.sleep(nanoseconds: 1_000_000_000) }
} catch {
    fail("\(error)")
}
