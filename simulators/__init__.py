"""Device simulators: they speak the drivers' protocol from the device side."""
