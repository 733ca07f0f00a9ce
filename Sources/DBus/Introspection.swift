/// Builds `org.freedesktop.DBus.Introspectable.Introspect` XML (D-Bus specification,
/// "Introspection Data Format") for an exported object and its direct children.
enum Introspection {
    static let header = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
        "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">

        """

    static let standardInterfaces = """
          <interface name="org.freedesktop.DBus.Introspectable">
            <method name="Introspect"><arg name="xml" type="s" direction="out"/></method>
          </interface>
          <interface name="org.freedesktop.DBus.Properties">
            <method name="Get"><arg name="interface" type="s" direction="in"/><arg name="name" type="s" direction="in"/><arg name="value" type="v" direction="out"/></method>
            <method name="GetAll"><arg name="interface" type="s" direction="in"/><arg name="properties" type="a{sv}" direction="out"/></method>
            <method name="Set"><arg name="interface" type="s" direction="in"/><arg name="name" type="s" direction="in"/><arg name="value" type="v" direction="in"/></method>
            <signal name="PropertiesChanged"><arg name="interface" type="s"/><arg name="changed_properties" type="a{sv}"/><arg name="invalidated_properties" type="as"/></signal>
          </interface>

        """

    static let objectManager = """
          <interface name="org.freedesktop.DBus.ObjectManager">
            <method name="GetManagedObjects"><arg name="objects" type="a{oa{sa{sv}}}" direction="out"/></method>
            <signal name="InterfacesAdded"><arg name="object" type="o"/><arg name="interfaces" type="a{sa{sv}}"/></signal>
            <signal name="InterfacesRemoved"><arg name="object" type="o"/><arg name="interfaces" type="as"/></signal>
          </interface>

        """

    static func xml(interfaces: [DBusInterface], isObjectManager: Bool, children: [String]) -> String {
        var out = header + "<node>\n"
        if !interfaces.isEmpty || isObjectManager { out += standardInterfaces }
        if isObjectManager { out += objectManager }
        for interface in interfaces {
            out += "  <interface name=\"\(escape(interface.name))\">\n"
            for method in interface.methods {
                out += "    <method name=\"\(escape(method.name))\">"
                out += arguments(method.inputSignature, names: method.inputNames, direction: "in")
                out += arguments(method.outputSignature, names: method.outputNames, direction: "out")
                out += "</method>\n"
            }
            for signal in interface.signals {
                out += "    <signal name=\"\(escape(signal.name))\">"
                out += arguments(signal.signature, names: signal.argumentNames, direction: nil)
                out += "</signal>\n"
            }
            for property in interface.properties {
                out +=
                    "    <property name=\"\(escape(property.name))\" type=\"\(escape(property.type.description))\" access=\"\(property.access.rawValue)\"/>\n"
            }
            out += "  </interface>\n"
        }
        for child in children { out += "  <node name=\"\(escape(child))\"/>\n" }
        return out + "</node>\n"
    }

    private static func arguments(_ signature: DBusSignature?, names: [String], direction: String?) -> String {
        var out = ""
        for (index, type) in (signature?.types ?? []).enumerated() {
            out += "<arg"
            if index < names.count { out += " name=\"\(escape(names[index]))\"" }
            out += " type=\"\(escape(type.description))\""
            if let direction { out += " direction=\"\(direction)\"" }
            out += "/>"
        }
        return out
    }

    private static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(character)
            }
        }
        return out
    }
}
