// swift-tools-version:6.1
import PackageDescription

// Your own gattway: the same command line (`run`, `config check`, `scan`, `decode`, …) with Swift
// parsers of your own. Depends on gattway by path here; a package of yours would name gattway's
// repository and a version instead (README.md).
let package = Package(
    name: "custom-parser",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "gattway", path: "../..")],
    targets: [
        .executableTarget(
            name: "custom-gattway",
            dependencies: [
                .product(name: "GattwayKit", package: "gattway"),
                .product(name: "Parsers", package: "gattway"),
                .product(name: "Bluetooth", package: "gattway"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
