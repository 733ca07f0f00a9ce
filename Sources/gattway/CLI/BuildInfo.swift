/// What `gattway version` reports.
enum BuildInfo {
    /// The release version; bumped by hand on release.
    static let version = "0.1.0-dev"
}
