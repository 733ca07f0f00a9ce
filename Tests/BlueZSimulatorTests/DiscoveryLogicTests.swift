import Bluetooth
import Testing

@testable import BlueZSimulator

@Suite("Discovery filter merging and the advertisement cache (BlueZ 5.66 rules)")
struct DiscoveryLogicTests {
    let battery = BluetoothUUID(0x180F)
    let heartRate = BluetoothUUID(0x180D)
    let address = BluetoothAddress("A4:C1:38:00:00:01")!

    func filter(_ uuids: [BluetoothUUID] = [], rssi: Int16? = nil, duplicates: Bool = false, pattern: String? = nil)
        -> DiscoveryFilter
    {
        var filter = DiscoveryFilter()
        filter.uuids = uuids
        filter.rssi = rssi
        filter.duplicateData = duplicates
        filter.pattern = pattern
        return filter
    }

    @Test("UUID filters are united across clients and match advertised service UUIDs only")
    func uuidUnion() {
        let merged = MergedDiscoveryFilter([filter([battery]), filter([heartRate])])
        #expect(merged.isFiltered)
        #expect(merged.uuids == [battery, heartRate])
        #expect(merged.admits(address: address, name: nil, serviceUUIDs: [battery], rssi: -60, discoverable: true))
        #expect(
            !merged.admits(
                address: address, name: nil, serviceUUIDs: [BluetoothUUID(0x181A)], rssi: -60, discoverable: true))
    }

    @Test("a client discovering without a filter makes the scan unfiltered for everyone")
    func unfilteredClientWins() {
        let merged = MergedDiscoveryFilter([filter([battery]), nil])
        #expect(!merged.isFiltered)
        #expect(merged.admits(address: address, name: nil, serviceUUIDs: [heartRate], rssi: -60, discoverable: true))
        #expect(
            !merged.admits(address: address, name: nil, serviceUUIDs: [], rssi: -60, discoverable: false),
            "an unfiltered LE scan ignores devices without the discoverable flag")
    }

    @Test("the lowest RSSI threshold applies; a client without one disables RSSI filtering")
    func rssiMerge() {
        #expect(MergedDiscoveryFilter([filter(rssi: -70), filter(rssi: -50)]).rssi == -70)
        #expect(MergedDiscoveryFilter([filter(rssi: -70), filter()]).rssi == nil)
        let merged = MergedDiscoveryFilter([filter(rssi: -70)])
        #expect(!merged.admits(address: address, name: nil, serviceUUIDs: [], rssi: -80, discoverable: true))
    }

    @Test("a pattern set by one client filters for every client (5.66 code, not the docs)")
    func patternForEveryone() {
        let merged = MergedDiscoveryFilter([filter(pattern: "A4:C1"), filter()])
        #expect(merged.admits(address: address, name: nil, serviceUUIDs: [], rssi: -60, discoverable: true))
        let other = BluetoothAddress("11:22:33:44:55:66")!
        #expect(!merged.admits(address: other, name: "Kitchen", serviceUUIDs: [], rssi: -60, discoverable: true))
    }

    @Test("RSSI is signalled on every report in a filtered scan, only on an 8 dBm move otherwise")
    func rssiUpdates() {
        var filtered = AdvertisementCache()
        #expect(filtered.apply(.init(rssi: -60), filteredDiscovery: true, duplicateData: false).contains(.rssi))
        #expect(filtered.apply(.init(rssi: -60), filteredDiscovery: true, duplicateData: false) == .rssi)
        var plain = AdvertisementCache()
        _ = plain.apply(.init(rssi: -60), filteredDiscovery: false, duplicateData: false)
        #expect(plain.apply(.init(rssi: -65), filteredDiscovery: false, duplicateData: false).isEmpty)
        #expect(plain.apply(.init(rssi: -68), filteredDiscovery: false, duplicateData: false) == .rssi)
    }

    @Test("manufacturer data is merged by company id and signalled only on change unless DuplicateData")
    func manufacturerMerge() {
        var cache = AdvertisementCache()
        let first = AdvertisementReport(rssi: -60, manufacturerData: [(0x0499, [1])])
        #expect(cache.apply(first, filteredDiscovery: false, duplicateData: false).contains(.manufacturerData))
        #expect(!cache.apply(first, filteredDiscovery: false, duplicateData: false).contains(.manufacturerData))
        let other = AdvertisementReport(rssi: -60, manufacturerData: [(0x004C, [2])])
        #expect(cache.apply(other, filteredDiscovery: false, duplicateData: false).contains(.manufacturerData))
        #expect(cache.manufacturerData.map(\.companyID) == [0x0499, 0x004C], "ids are never removed")
        #expect(cache.apply(other, filteredDiscovery: false, duplicateData: true).contains(.manufacturerData))
        #expect(cache.manufacturerData.map(\.companyID) == [0x004C], "DuplicateData clears the cache first")
    }

    @Test("stopping discovery invalidates RSSI and TxPower")
    func stopInvalidates() {
        var cache = AdvertisementCache()
        _ = cache.apply(.init(rssi: -60, txPower: 4), filteredDiscovery: true, duplicateData: false)
        #expect(cache.discoveryStopped() == [.rssi, .txPower])
        #expect(cache.rssi == nil)
        #expect(cache.discoveryStopped().isEmpty)
    }
}
