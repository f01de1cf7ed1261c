"""The HTTP API: a thin shell over the packages."""
