"""The render control plane: requests, attempts on renderer slots, leases, CAS results."""
