/// What `gattway version` reports.
public enum BuildInfo {
    /// The release version; bumped by hand on release.
    public static let version = "0.1.0-dev"
}
