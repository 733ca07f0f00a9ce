/// The configuration of a private `dbus-daemon` that stands in for the system bus (tests, the
/// demo): a session-type bus on a unix socket where anyone may own any name — so a process can
/// own `org.bluez` — and eavesdrop, with `extra` elements (e.g. `<limit>`s) added at the end.
public enum PrivateBusConfiguration {
    public static func xml(socketPath: String, extra: String = "") -> String {
        """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>unix:path=\(socketPath)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        \(extra)
        </busconfig>
        """
    }
}
