import Testing
@Test func placeholderMQTT() {}
