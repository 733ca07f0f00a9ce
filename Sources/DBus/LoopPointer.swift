/// A libdbus object pointer (`DBusWatch*`, `DBusTimeout*`, `DBusMessage*`, `DBusPendingCall*`)
/// handed from a C callback into the connection actor's isolation.
///
/// Invariant behind `@unchecked Sendable`: it is created in a libdbus callback on the loop thread
/// and used only inside `assumeIsolated` on that same thread, so it never crosses threads; the
/// wrapper only lets the compiler see that the pointer enters the actor's region.
struct LoopPointer: @unchecked Sendable {
    let raw: OpaquePointer
    init(_ raw: OpaquePointer) { self.raw = raw }
}
