public enum BluetoothPlaceholder {}
