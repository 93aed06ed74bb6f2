"""Structured (JSON) logs for the gateway and the workers; every line about a job carries `evaluation_id`."""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter


def configure_json_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s", timestamp=False))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
