import Foundation
import Testing

@testable import GatewayRuntime

@Suite("The web page's files are served from the binary")
struct WebPageAssetsTests {
    /// webpage/ of the repository this test file is in.
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("webpage")

    @Test("each served file is byte for byte the file under webpage/ (scripts/web-assets.py made it)")
    func sameBytes() throws {
        let names = ["/": "index.html", "/page.css": "page.css", "/page.js": "page.js"]
        #expect(WebPageAssets.files.map(\.path).sorted() == names.keys.sorted())
        for file in WebPageAssets.files {
            let name = try #require(names[file.path])
            let onDisk = try Data(contentsOf: Self.directory.appendingPathComponent(name))
            #expect(Array(file.body.utf8) == Array(onDisk), "\(name): run scripts/web-assets.py")
        }
    }

    @Test("the page builds no HTML from data: no innerHTML, outerHTML, insertAdjacentHTML or document.write")
    func textOnly() {
        let script = WebPageAssets.page_js
        for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("] {
            #expect(!script.contains(sink), "page.js uses \(sink)")
        }
        // No outside resource: everything comes from this server.
        for file in WebPageAssets.files {
            #expect(!file.body.contains("http://") || file.path == "/page.js", "\(file.path) loads from elsewhere")
            #expect(!file.body.contains("https://"), "\(file.path) loads from elsewhere")
        }
    }
}
