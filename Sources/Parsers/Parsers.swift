public enum ParsersPlaceholder {}
