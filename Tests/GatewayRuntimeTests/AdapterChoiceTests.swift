import Bluetooth
import Gateway
import Testing

@testable import GatewayRuntime

@Suite("Which adapter a link goes through (AdapterChoice)")
struct AdapterChoiceTests {
    let device = BluetoothAddress("A4:C1:38:00:00:01")!
    let other = BluetoothAddress("A4:C1:38:00:00:02")!

    @Test("the adapter that heard the device strongest lately, among the usable ones")
    func strongest() {
        var choice = AdapterChoice(adapters: 3, slotsPerAdapter: 2)
        choice.heard(0, device, rssi: -80, at: 0)
        choice.heard(1, device, rssi: -50, at: 1)
        choice.heard(2, device, rssi: -60, at: 2)
        #expect(choice.best(for: device, usable: [true, true, true], at: 3) == 1)
        // hci1 off (or pulled out): the next strongest.
        #expect(choice.best(for: device, usable: [true, false, true], at: 3) == 2)
        // hci1's report is older than heardFor: it no longer counts.
        #expect(choice.best(for: device, usable: [true, true, true], at: 1 + AdapterChoice.heardFor + 1) == 2)
        // No RSSI (127 from the controller) counts as the weakest, but still as heard.
        var weak = AdapterChoice(adapters: 2, slotsPerAdapter: 1)
        weak.heard(1, device, rssi: nil, at: 0)
        #expect(weak.best(for: device, usable: [true, true], at: 0) == 1)
    }

    @Test("an adapter whose slots are full gives way to the next; all full: the strongest anyway")
    func fullSlots() {
        var choice = AdapterChoice(adapters: 2, slotsPerAdapter: 1)
        choice.heard(0, device, rssi: -80, at: 0)
        choice.heard(1, device, rssi: -40, at: 0)
        choice.heard(1, other, rssi: -40, at: 0)
        let claimedOther1 = choice.claim(other, on: 1)
        #expect(claimedOther1)
        #expect(choice.links(on: 1) == 1)
        #expect(choice.best(for: device, usable: [true, true], at: 0) == 0)
        let claimedDevice0 = choice.claim(device, on: 0)
        #expect(claimedDevice0)
        // Both full: the strongest usable one for a third device.
        let third = BluetoothAddress("A4:C1:38:00:00:03")!
        choice.heard(1, third, rssi: -30, at: 0)
        #expect(choice.best(for: third, usable: [true, true], at: 0) == 1)
        // A link ended frees its slot.
        choice.release(other, on: 1)
        #expect(choice.best(for: device, usable: [true, true], at: 0) == 0)  // it owns hci0 now
        #expect(choice.best(for: other, usable: [true, true], at: 0) == 1)
    }

    @Test("never heard: the first usable adapter with a free slot; none usable: the first")
    func unheard() {
        var choice = AdapterChoice(adapters: 2, slotsPerAdapter: 1)
        #expect(choice.best(for: device, usable: [true, true], at: 0) == 0)
        #expect(choice.best(for: device, usable: [false, true], at: 0) == 1)
        #expect(choice.best(for: device, usable: [false, false], at: 0) == 0)
        choice.claim(other, on: 0)
        #expect(choice.best(for: device, usable: [true, true], at: 0) == 1)
    }

    @Test("a first link waits up to a second after the first report for the other usable adapters to hear the device")
    func settle() {
        var choice = AdapterChoice(adapters: 2, slotsPerAdapter: 1)
        choice.heard(0, device, rssi: -80, at: 10)
        #expect(choice.wait(for: device, usable: [true, true], at: 10.25) == AdapterChoice.settle - 0.25)
        #expect(choice.wait(for: device, usable: [true, false], at: 10.25) == 0)  // hci1 cannot be used
        #expect(choice.wait(for: device, usable: [true, true], at: 10 + AdapterChoice.settle + 1) == 0)
        choice.heard(1, device, rssi: -40, at: 10.5)
        #expect(choice.wait(for: device, usable: [true, true], at: 10.5) == 0)  // both heard it
        #expect(choice.best(for: device, usable: [true, true], at: 10.5) == 1)
    }

    @Test("one link per device: a device linked through one adapter is not claimed by another")
    func oneOwner() {
        var choice = AdapterChoice(adapters: 2, slotsPerAdapter: 3)
        let claimedDevice1 = choice.claim(device, on: 1)
        #expect(claimedDevice1)
        let claimedDevice0 = choice.claim(device, on: 0)
        #expect(!claimedDevice0)
        #expect(choice.best(for: device, usable: [true, true], at: 0) == 1)
        choice.release(device, on: 0)  // not its adapter: nothing changes
        #expect(choice.owners[device] == 1)
        choice.releaseAll(on: 1)
        #expect(choice.owners[device] == nil)
    }

    @Test("reports are counted per adapter; the remembered addresses are bounded")
    func bounded() {
        var choice = AdapterChoice(adapters: 2, slotsPerAdapter: 1)
        for index in 0..<(AdapterChoice.addressLimit + 10) {
            let address = BluetoothAddress(rawValue: UInt64(index))
            choice.heard(index % 2, address, rssi: -60, at: 0)
        }
        #expect(choice.heard.count <= AdapterChoice.addressLimit)
        #expect(choice.reports == [(AdapterChoice.addressLimit + 10) / 2, (AdapterChoice.addressLimit + 10) / 2])
        // One adapter: nothing to choose, nothing remembered, still counted.
        var single = AdapterChoice(adapters: 1, slotsPerAdapter: 1)
        single.heard(0, device, rssi: -60, at: 0)
        #expect(single.heard.isEmpty && single.reports == [1])
    }

    @Test(
        "prefer_adapter: the preferred adapter while it hears the device above the floor, however much better another")
    func preferred() {
        var choice = AdapterChoice(adapters: 2, slotsPerAdapter: 2)
        choice.prefer(device, adapter: 0, floor: -90)
        choice.heard(0, device, rssi: -85, at: 0)
        choice.heard(1, device, rssi: -40, at: 0)
        #expect(choice.best(for: device, usable: [true, true], at: 1) == 0)
        // The other device, with no preference, goes to the stronger as before.
        choice.heard(0, other, rssi: -85, at: 0)
        choice.heard(1, other, rssi: -40, at: 0)
        #expect(choice.best(for: other, usable: [true, true], at: 1) == 1)
        // Below the floor: lapsed, the strongest again.
        choice.heard(0, device, rssi: -95, at: 2)
        #expect(choice.best(for: device, usable: [true, true], at: 3) == 1)
        // Above it again: the preferred one.
        choice.heard(0, device, rssi: -89, at: 4)
        #expect(choice.best(for: device, usable: [true, true], at: 5) == 0)
        // Not heard there for longer than heardFor: lapsed.
        choice.heard(1, device, rssi: -40, at: 4 + AdapterChoice.heardFor)
        #expect(choice.best(for: device, usable: [true, true], at: 4 + AdapterChoice.heardFor + 1) == 1)
        // The preferred adapter off, or full: the others.
        choice.heard(0, device, rssi: -80, at: 100)
        #expect(choice.best(for: device, usable: [false, true], at: 100) == 1)
        choice.claim(BluetoothAddress("A4:C1:38:00:00:03")!, on: 0)
        choice.claim(BluetoothAddress("A4:C1:38:00:00:04")!, on: 0)
        #expect(choice.best(for: device, usable: [true, true], at: 100) == 1)
    }

    @Test("prefer_adapter: a link waits for no other adapter once the preferred one heard the device above the floor")
    func preferredNoWait() {
        var choice = AdapterChoice(adapters: 2, slotsPerAdapter: 1)
        choice.prefer(device, adapter: 1, floor: -90)
        choice.heard(0, device, rssi: -40, at: 10)
        // Only hci0 heard it: the usual wait for hci1.
        #expect(choice.wait(for: device, usable: [true, true], at: 10) == AdapterChoice.settle)
        var heardByPreferred = AdapterChoice(adapters: 3, slotsPerAdapter: 1)
        heardByPreferred.prefer(device, adapter: 1, floor: -90)
        heardByPreferred.heard(1, device, rssi: -70, at: 10)
        #expect(heardByPreferred.wait(for: device, usable: [true, true, true], at: 10) == 0)
        #expect(heardByPreferred.best(for: device, usable: [true, true, true], at: 10) == 1)
        // A preference for an adapter that is not there is ignored; the preferences are bounded.
        heardByPreferred.prefer(other, adapter: 7, floor: -90)
        #expect(heardByPreferred.preferred[other] == nil)
        for index in 0..<(AdapterChoice.addressLimit + 10) {
            heardByPreferred.prefer(BluetoothAddress(rawValue: UInt64(index)), adapter: 0, floor: -90)
        }
        #expect(heardByPreferred.preferred.count <= AdapterChoice.addressLimit)
    }
}
