extension BluetoothUUID {
    /// The SIG-assigned name of a common service, characteristic or member UUID
    /// (Bluetooth Assigned Numbers, sections 3.4 and 3.8), e.g. `Battery Service` for `180F`;
    /// nil for UUIDs not in this table.
    public var name: String? {
        guard let short = uint16 else { return nil }
        return Self.sigNames[short]
    }

    static let sigNames: [UInt16: String] = [
        // Services
        0x1800: "Generic Access", 0x1801: "Generic Attribute", 0x1802: "Immediate Alert",
        0x1803: "Link Loss", 0x1804: "Tx Power", 0x1805: "Current Time", 0x1809: "Health Thermometer",
        0x180A: "Device Information", 0x180D: "Heart Rate", 0x180F: "Battery Service",
        0x1810: "Blood Pressure", 0x1812: "Human Interface Device", 0x1816: "Cycling Speed and Cadence",
        0x1819: "Location and Navigation", 0x181A: "Environmental Sensing", 0x181B: "Body Composition",
        0x181C: "User Data", 0x181D: "Weight Scale", 0x1826: "Fitness Machine",
        // Characteristics
        0x2A00: "Device Name", 0x2A01: "Appearance", 0x2A04: "Peripheral Preferred Connection Parameters",
        0x2A05: "Service Changed", 0x2A19: "Battery Level", 0x2A1B: "Battery Level State",
        0x2A1C: "Temperature Measurement", 0x2A1D: "Temperature Type", 0x2A23: "System ID",
        0x2A24: "Model Number String", 0x2A25: "Serial Number String", 0x2A26: "Firmware Revision String",
        0x2A27: "Hardware Revision String", 0x2A28: "Software Revision String",
        0x2A29: "Manufacturer Name String", 0x2A35: "Blood Pressure Measurement",
        0x2A37: "Heart Rate Measurement", 0x2A38: "Body Sensor Location", 0x2A5B: "CSC Measurement",
        0x2A6C: "Elevation", 0x2A6D: "Pressure", 0x2A6E: "Temperature", 0x2A6F: "Humidity",
        0x2A9D: "Weight Measurement", 0x2AFB: "Illuminance", 0x2BED: "Battery Level Status",
        // Descriptors
        0x2901: "Characteristic User Description", 0x2902: "Client Characteristic Configuration",
        // Member services used by advertisement formats
        0xFCD2: "BTHome", 0xFE95: "Xiaomi", 0xFEAA: "Eddystone",
    ]
}
