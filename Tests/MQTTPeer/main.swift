print("mqtt peer: not yet")
