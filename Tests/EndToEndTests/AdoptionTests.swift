import BlueZSimulator
import DBus
import EventLoop
import Foundation
import MQTT
import TestSupport
import Testing

/// A device another BlueZ client connected and left connected before `gattway run` started.
@Suite("End to end: adopting a link that is already up")
struct AdoptionTests {
    static let battery = "A4:C1:38:00:00:01"

    @Test(
        "a device already connected when the gateway starts, silent while connected, is subscribed and its readings arrive"
    )
    func alreadyConnected() async throws {
        // Like most single-link peripherals, the battery sensor stops advertising while a central
        // is connected: the gateway can only reach it through the link that is already up.
        let scenario = try EndToEnd.fastDemo { scenario in
            for index in scenario.devices.indices where scenario.devices[index].name == "Battery Sensor" {
                scenario.devices[index].advertisesWhileConnected = false
            }
        }
        let config = """
            {
              "mqtt": {"server": "$SERVER", "base_topic": "gattway"},
              "bluetooth": {"connect_timeout": "5s", "gatt_timeout": "3s"},
              "devices": [
                {"match": {"address": "\(Self.battery)"}, "name": "battery_sensor", "connect": true,
                 "subscribe": [{"service": "180F", "characteristic": "2A19"}]}
              ]
            }
            """
        try await EndToEnd.run(config: config, scenario: scenario, beforeGateway: Self.connectAndLeave) { e2e in
            let before = await e2e.simulator.currentCounters
            // The link stays up: no Connect from the gateway, no second link; the first reading
            // can only come over the adopted link (the device does not advertise meanwhile, and
            // the previous client's scan ended, so BlueZ reports no RSSI for it either). Without
            // adoption nothing arrives at all, so the bound only has to exceed a loaded start.
            let reading = try await e2e.messages.next(on: EndToEnd.topic("battery_sensor"), timeout: 30) {
                $0.number("battery") != nil
            }
            let events = e2e.messages.messages(on: "gattway/bridge/event")
            let connected = try #require(
                events.first { $0.string("type") == "device_connected" }, "\(events.map(\.text))")
            #expect(connected.arrival <= reading.arrival)
            let online = e2e.messages.messages(on: EndToEnd.topic("battery_sensor", "availability")).last
            #expect(online?.text == #"{"state":"online"}"#)
            let after = await e2e.simulator.currentCounters
            #expect(
                after.connectCalls == before.connectCalls, "the gateway called Connect on a device already connected")
            #expect(after.disconnects == before.disconnects, "the link was dropped and made again")
        }
    }

    /// Another BlueZ client finds the battery sensor, connects it, waits until its services are
    /// resolved, stops its scan and leaves the bus — the link stays up (as in bluetoothd).
    @Sendable static func connectAndLeave(_ bus: String, _ loop: EventLoop) async throws {
        let connection = try await DBusConnection.connect(to: .address(bus), on: loop)
        do {
            try await connectAndResolve(connection)
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
    }

    private static func connectAndResolve(_ connection: DBusConnection) async throws {
        let adapter: DBusObjectPath = "/org/bluez/hci0"
        let device: DBusObjectPath = "/org/bluez/hci0/dev_A4_C1_38_00_00_01"
        _ = try await connection.call(
            destination: "org.bluez", path: adapter, interface: "org.bluez.Adapter1", method: "StartDiscovery")
        try await poll("\(Self.battery) connected") {
            // Unknown until the scan reports it (org.freedesktop.DBus.Error.UnknownObject).
            (try? await connection.call(
                destination: "org.bluez", path: device, interface: "org.bluez.Device1", method: "Connect")) != nil
        }
        try await poll("\(Self.battery) services resolved") {
            let reply = try await connection.call(
                destination: "org.bluez", path: device, interface: "org.freedesktop.DBus.Properties", method: "Get",
                arguments: [.string("org.bluez.Device1"), .string("ServicesResolved")])
            return reply.first?.bool == true
        }
        _ = try await connection.call(
            destination: "org.bluez", path: adapter, interface: "org.bluez.Adapter1", method: "StopDiscovery")
    }

    private static func poll(_ what: String, _ done: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while try await !done() {
            guard ContinuousClock.now < deadline else { throw EndToEndTimeout(what: what) }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}

private struct EndToEndTimeout: Error, CustomStringConvertible {
    let what: String
    var description: String { "not \(what) within 30 s" }
}
