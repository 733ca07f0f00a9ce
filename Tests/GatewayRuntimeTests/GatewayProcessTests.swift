import EventLoop
import Foundation
import Gateway
import Testing

@testable import GatewayRuntime

@Suite("GatewayProcess: gattway run's services as data")
struct GatewayProcessTests {
    static func process(_ output: Recorded<String> = Recorded()) -> GatewayProcess {
        GatewayProcess(
            GatewayProcess.Options(configPath: "/nonexistent/config.json", level: .info, stateDirectory: nil),
            errorOutput: { output.append($0) })
    }

    static func stages(_ json: String) throws -> [ServiceGroup.Stage] {
        let loop = EventLoop()
        defer { loop.shutdown() }
        return process().services(try GatewayConfig.parse(Array(json.utf8)), loop: loop, log: GatewayLogger.none)
    }

    @Test(
        "the services start MQTT, central, peripheral, proxy, core, web server, systemd; the connections stop last and together, in the close window"
    )
    func order() throws {
        let both = try Self.stages(
            #"{"role": "both", "peripheral": {"services": []}, "bluetooth_proxy": {"enabled": true, "plaintext": true}}"#
        )
        #expect(
            both.map { $0.services.map(\.name) } == [
                ["MQTT", "BlueZ", "BlueZ"], ["Bluetooth proxy", "gateway"], ["web server"], ["systemd"],
            ])
        #expect(both[0].services[1] is BlueZCentralService && both[0].services[2] is BlueZPeripheralService)
        #expect(both.map(\.window) == [.close, .wait, .wait, .wait])
        let central = try Self.stages(#"{"web": {"enabled": false}}"#)
        #expect(central.map { $0.services.map(\.name) } == [["MQTT", "BlueZ"], ["gateway"], ["systemd"]])
    }

    @Test("a configuration that cannot be read ends the process with 78 and says why, before anything starts")
    func unreadableConfig() async {
        let output = Recorded<String>()
        #expect(await Self.process(output).run() == .config)
        #expect(output.all.joined() == "<3>/nonexistent/config.json: cannot read /nonexistent/config.json\n")
    }
}
