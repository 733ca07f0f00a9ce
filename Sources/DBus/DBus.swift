public enum DBusPlaceholder {}
