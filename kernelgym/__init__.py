"""The `kernelgym` command line and the local stack it can start (Redis, gateway, workers)."""
