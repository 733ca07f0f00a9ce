import Testing
@Test func placeholderBluetooth() {}
