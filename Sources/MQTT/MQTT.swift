public enum MQTTPlaceholder {}
