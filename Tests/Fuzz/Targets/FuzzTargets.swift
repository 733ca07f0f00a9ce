/// Every fuzz target, one per external input surface (docs/operations.md, "Untrusted input").
/// A new input surface adds its target here; `make fuzz` and the tests pick it up.
public enum FuzzTargets {
    public static let all: [FuzzTarget] = [
        advertisement,
        characteristic,
        config,
        scenario,
        gattTree,
        storeAndForward,
        json,
        decodeLine,
        centralState,
        bindKeys,
        mqttCommands,
        peripheralSources,
        bluezObjects,
        dbusWire,
        notifyDatagrams,
        esphomeAPI,
        fleetMessages,
        managementEvent,
        mqttSession,
        proxyBackend,
        agentCalls,
        webRequest,
        radioView,
        presenceConfig,
        presenceRequest,
        presenceFile,
    ]

    public static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }
}
