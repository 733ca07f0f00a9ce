// swift-tools-version:6.1
import PackageDescription

/// Layering (docs/architecture.md, "Layers"): only `DBus` imports `CDBus`, only `MQTT` imports
/// `CMosquitto`, only `Parsers` and `ESPHomeAPI` import `CCrypto`, only `HTTPServer` imports `CMicroHTTPD`, always as `internal import` so no C type can
/// leak into a public signature. Only `GattwayKit` (the command line) imports `GatewayRuntime`, and only
/// the `gattway` executable and users' packages import `GattwayKit`, which imports no C module.
/// `scripts/check-layering.sh` (run by `make test`) enforces these rules.
let package = Package(
    name: "gattway",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "gattway", targets: ["gattway"]),
        // The whole command line as a library: a package of your own runs it with its own Swift
        // parsers (`Gattway.main(parsers:advertisementParsers:)`; Examples/custom-parser).
        .library(name: "GattwayKit", targets: ["GattwayKit"]),
        .library(name: "DBus", targets: ["DBus"]),
        .library(name: "MQTT", targets: ["MQTT"]),
        .library(name: "Bluetooth", targets: ["Bluetooth"]),
        .library(name: "BluetoothManagement", targets: ["BluetoothManagement"]),
        .library(name: "Parsers", targets: ["Parsers"]),
        .library(name: "BlueZ", targets: ["BlueZ"]),
        .library(name: "ESPHomeAPI", targets: ["ESPHomeAPI"]),
        .library(name: "GatewayRuntime", targets: ["GatewayRuntime"]),
        .library(name: "HTTPServer", targets: ["HTTPServer"]),
    ],
    targets: [
        // C libraries from Debian packages, through pkg-config.
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // libmicrohttpd's header only: the library is loaded when the web server first needs it
        // (Sources/CMicroHTTPD/shim.h), so no pkg-config (whose -lmicrohttpd would link it).
        .systemLibrary(name: "CMicroHTTPD", providers: [.apt(["libmicrohttpd-dev"])]),

        // The single poll() thread that owns every C library connection.
        .target(name: "EventLoop"),
        .target(name: "DBus", dependencies: ["CDBus", "EventLoop"]),
        .target(name: "MQTT", dependencies: ["CMosquitto", "EventLoop", "Retry", "FIFOQueue"]),
        .target(name: "Bluetooth"),
        // The web server (docs/web.md): libmicrohttpd in external-poll mode on the loop; routing,
        // query and form parsing, auth and CSRF, Server-Sent Events, Prometheus's text format.
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD", "EventLoop"]),
        // The kernel's Bluetooth management protocol (HCI_CHANNEL_CONTROL): packets, events,
        // commands; a codec only, no I/O.
        .target(name: "BluetoothManagement", dependencies: ["Bluetooth"]),
        // FIFO, the one first-in first-out queue (a ring buffer), for every target that needs one.
        .target(name: "FIFOQueue"),
        // Retry timing shared by MQTT, the central and the gateway: exponential backoff, the
        // reconnect policy, a seedable generator.
        .target(name: "Retry"),
        // posix_spawn with a clean signal mask, output to a log file, stop/kill (gattway demo's
        // children and the tests' daemons).
        .target(name: "Subprocess", dependencies: ["LocalSystem"]),
        // JSON values, parsing with path-named errors, compact serialization (config, scenarios, payloads).
        .target(name: "JSON"),
        // Files, environment and wall clock on POSIX calls, so the executable links no Foundation.
        .target(name: "LocalSystem"),
        .target(name: "Parsers", dependencies: ["Bluetooth", "JSON", "CCrypto"]),
        // The ESPHome native API (Home Assistant's Bluetooth proxy protocol): protobuf, plaintext and
        // Noise framing, the Noise handshake on libcrypto, the TCP server on the loop.
        .target(name: "ESPHomeAPI", dependencies: ["CCrypto", "EventLoop", "Bluetooth", "LocalSystem"]),
        // The Core-Bluetooth-style central (later also the peripheral role) over org.bluez.
        .target(
            name: "BlueZ",
            dependencies: [
                "DBus", "EventLoop", "Bluetooth", "BluetoothManagement", "JSON", "Retry", "LocalSystem", "FIFOQueue",
            ]
        ),
        // A virtual bluetoothd exporting the org.bluez API from a scenario file.
        .target(
            name: "BlueZSimulator",
            dependencies: [
                "DBus", "EventLoop", "Bluetooth", "BluetoothManagement", "JSON", "Retry", "LocalSystem", "Parsers",
            ]),
        // The gateway core (docs/architecture.md) against ports, on the event loop's thread; never
        // imports DBus, BlueZ or MQTT.
        .target(
            name: "Gateway",
            dependencies: ["Bluetooth", "Parsers", "JSON", "Retry", "LocalSystem", "EventLoop", "FIFOQueue"]),
        // The Home Assistant Bluetooth proxy's connections (docs/ha-bluetooth-proxy.md) against a
        // port over the central, attached to the gateway core (its slots and jobs); no BlueZ.
        .target(name: "ProxyBackend", dependencies: ["ESPHomeAPI", "Gateway", "Bluetooth", "EventLoop", "JSON"]),
        // `gattway serve --tree` files: BlueZ's peripheral types with Gateway's value encodings (which
        // may not import each other), a library so the fuzz target can parse hostile trees.
        .target(name: "GATTTree", dependencies: ["BlueZ", "Bluetooth", "Gateway", "JSON"]),
        // `gattway run` as a library (docs/architecture.md, "Layers"): the ports over BlueZ and MQTT,
        // the Bluetooth proxy, signals, sd_notify, and the ServiceGroup of the process's services.
        .target(
            name: "GatewayRuntime",
            dependencies: [
                "Gateway", "ProxyBackend", "BlueZ", "BluetoothManagement", "MQTT", "DBus", "ESPHomeAPI", "EventLoop",
                "Bluetooth", "JSON",
                "LocalSystem", "HTTPServer",
            ]
        ),
        // The command line (`run`, `doctor`, `demo`, the BLE commands) as a library: `Gattway.main`,
        // called by the gattway executable and by users' packages that add Swift parsers.
        .target(
            name: "GattwayKit",
            dependencies: [
                "EventLoop", "DBus", "MQTT", "Bluetooth", "Parsers", "JSON", "BlueZSimulator", "Gateway", "BlueZ",
                "Retry", "Subprocess", "LocalSystem",
                "GATTTree", "ESPHomeAPI", "GatewayRuntime", "BluetoothManagement", "HTTPServer",
            ]
        ),
        .executableTarget(name: "gattway", dependencies: ["GattwayKit"]),
        .executableTarget(
            name: "gattway-bench",
            dependencies: [
                "EventLoop", "DBus", "MQTT", "Bluetooth", "BluetoothManagement", "Parsers", "BlueZSimulator",
                "TestSupport",
                "ESPHomeAPI", "Gateway",
            ],
            path: "bench/Sources"
        ),

        // A separate MQTT client process for tests that kill a client (last will) or need a peer.
        .executableTarget(name: "gattway-mqtt-peer", dependencies: ["MQTT", "EventLoop"], path: "Tests/MQTTPeer"),
        // The CentralManager scenario against the real bluetoothd in the real-BlueZ VM (make test-bluez).
        .executableTarget(
            name: "realbluez-central", dependencies: ["BlueZ", "Bluetooth", "DBus", "EventLoop", "Retry"],
            path: "Tests/RealBlueZ/Central"),

        // Fuzzing (Tests/Fuzz, docs/operations.md "Untrusted input"): one target per external input
        // surface; gattway-fuzz runs them with libFuzzer when built with -sanitize=fuzzer (make
        // fuzz, make test-fuzz), else with a seeded mutational loop; FuzzTests replays the corpus.
        .systemLibrary(name: "CFuzzer", path: "Tests/Fuzz/CFuzzer"),
        .target(
            name: "FuzzTargets",
            dependencies: [
                "Parsers", "Bluetooth", "BluetoothManagement", "JSON", "Retry", "LocalSystem", "Gateway",
                "GatewayFakes",
                "BlueZSimulator", "GATTTree", "BlueZ", "DBus", "EventLoop", "ESPHomeAPI", "MQTT", "ProxyBackend",
                "HTTPServer",
            ],
            path: "Tests/Fuzz/Targets"),
        .executableTarget(
            name: "gattway-fuzz", dependencies: ["FuzzTargets", "CFuzzer", "LocalSystem"], path: "Tests/Fuzz/Runner"),
        .testTarget(name: "FuzzTests", dependencies: ["FuzzTargets"]),

        // Starts real daemons (dbus-daemon, mosquitto) for integration tests and stops them.
        .target(name: "TestSupport", dependencies: ["Subprocess", "LocalSystem"], path: "Tests/TestSupport"),
        .testTarget(name: "EventLoopTests", dependencies: ["EventLoop"]),
        .testTarget(name: "DBusTests", dependencies: ["DBus", "EventLoop", "TestSupport"]),
        .testTarget(name: "MQTTTests", dependencies: ["MQTT", "EventLoop", "TestSupport", "Retry"]),
        .testTarget(name: "BluetoothTests", dependencies: ["Bluetooth"]),
        .testTarget(name: "BluetoothManagementTests", dependencies: ["BluetoothManagement", "Bluetooth"]),
        .testTarget(name: "FIFOQueueTests", dependencies: ["FIFOQueue"]),
        .testTarget(name: "JSONTests", dependencies: ["JSON"]),
        // Noise vectors live in Tests/Fixtures/esphome and are found through #filePath.
        .testTarget(name: "ESPHomeAPITests", dependencies: ["ESPHomeAPI", "EventLoop", "GatewayFakes", "LocalSystem"]),
        .testTarget(name: "RetryTests", dependencies: ["Retry"]),
        // The web server's parsing, routing, auth and Prometheus formatting, and the server itself on
        // a loop against curl.
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "EventLoop", "TestSupport"]),
        .testTarget(name: "LocalSystemTests", dependencies: ["LocalSystem"]),
        .testTarget(
            name: "BlueZTests",
            dependencies: [
                "BlueZ", "BlueZSimulator", "Bluetooth", "BluetoothManagement", "DBus", "EventLoop", "LocalSystem",
                "Retry", "TestSupport", "FuzzTargets",
            ]
        ),
        .testTarget(
            name: "BlueZSimulatorTests",
            dependencies: [
                "BlueZSimulator", "Bluetooth", "BluetoothManagement", "DBus", "JSON", "LocalSystem", "TestSupport",
                "Gateway", "Parsers",
            ]),
        // Vectors live in Tests/Fixtures and are found through #filePath.
        .testTarget(name: "ParsersTests", dependencies: ["Parsers", "Bluetooth", "Retry", "JSON"]),
        .testTarget(name: "CLITests", dependencies: ["TestSupport"]),
        // In-memory BLE, MQTT and peripheral ports for the gateway's tests and fuzz targets, and
        // the Bluetooth proxy's port and server side (FakeProxyBLE, RecordingServer).
        .target(
            name: "GatewayFakes", dependencies: ["Gateway", "Bluetooth", "EventLoop", "ProxyBackend", "ESPHomeAPI"],
            path: "Tests/GatewayFakes"),
        .testTarget(
            name: "GatewayTests",
            dependencies: ["Gateway", "GatewayFakes", "Parsers", "Bluetooth", "JSON", "EventLoop", "TestSupport"]),
        // The proxy's backend against an in-memory port and a real gateway with the core's fakes.
        .testTarget(
            name: "ProxyBackendTests",
            dependencies: ["ProxyBackend", "ESPHomeAPI", "Gateway", "GatewayFakes", "Bluetooth", "EventLoop", "JSON"]),
        // The runtime's service group with fake services; its ports and notifier against a real
        // mosquitto, the simulator on a private bus and a datagram socket.
        .testTarget(
            name: "GatewayRuntimeTests",
            dependencies: [
                "GatewayRuntime", "Gateway", "MQTT", "BlueZ", "BlueZSimulator", "BluetoothManagement", "DBus",
                "EventLoop", "Bluetooth",
                "ESPHomeAPI", "LocalSystem", "TestSupport",
            ]
        ),
        // `gattway run` as a child process against the simulator, a private bus and a real mosquitto.
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "TestSupport", "MQTT", "EventLoop", "JSON", "BlueZSimulator", "DBus", "BlueZ", "Bluetooth",
                "ESPHomeAPI", "GatewayFakes",
            ]),
    ],
    swiftLanguageModes: [.v6]
)
