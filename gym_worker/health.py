"""Telling a sick GPU from a bad request: which evaluation failures count towards quarantine."""

from __future__ import annotations

# Trusted code failing in these ways points at the device or its driver, not at the submission.
DEVICE_FAULT_MARKERS = (
    "failed to start",  # a child could not initialise CUDA
    "reference process died",  # the trusted reference crashed
    "CUDA error",
    "cudaError",
    "CUBLAS_STATUS",
    "CUDA-capable device",
    "uncorrectable ECC",
)


def device_fault(message: str) -> bool:
    """Whether the service's failure to evaluate (not a verdict) implicates the device."""
    return any(marker in message for marker in DEVICE_FAULT_MARKERS)
