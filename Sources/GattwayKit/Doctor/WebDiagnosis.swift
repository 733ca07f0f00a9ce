import Gateway
import HTTPServer
import Subprocess

/// The web server check of `gattway doctor` (with `web.enabled`, the default; docs/web.md):
/// whether the running gattway's web server accepts connections on its configured address — a
/// TCP connection, nothing sent, so no request is counted or refused. A server that could not
/// listen (the port taken) lets `gattway run` go on without it, so only this and the log say so.
/// Probed when it listens on 127.0.0.1 or 0.0.0.0 (reached over loopback); on another address the
/// line says where it is configured. First, whether libmicrohttpd can be loaded at all: the server
/// loads it at its first visit (docs/web.md, "Memory"), so a missing package shows only then.
enum WebDiagnosis {
    static func check(_ web: WebSettings) -> [DoctorCheck] {
        guard web.enabled else { return [] }
        if let problem = HTTPServer.loadLibrary() {
            return [
                .fail(
                    "web", "the web server cannot load libmicrohttpd: \(problem)",
                    "install it: sudo apt install libmicrohttpd12 (or set web.enabled to false)")
            ]
        }
        let url = "\(web.tls == nil ? "http" : "https")://\(web.host):\(web.port)"
        let auth = web.hasAuth ? "auth required" : "no auth: this host only"
        guard web.host == "127.0.0.1" || web.host == "0.0.0.0" else {
            return [.ok("web", "\(url) (\(auth)); not probed from here")]
        }
        if LoopbackPort.accepts(web.port) { return [.ok("web", "\(url) accepts connections (\(auth))")] }
        return [
            .warn(
                "web", "nothing accepts connections on \(url)",
                "start gattway run; if it runs, its log says why it could not listen (\"web: cannot listen\"): "
                    + "free the port or set web.listen to another")
        ]
    }
}
