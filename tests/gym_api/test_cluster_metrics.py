"""The gateway's count of workers from their pool processes' heartbeats (`gym_api.metrics`): a worker is a
Celery node, one per GPU; each of its pool processes beats on its own."""

from gym_api.metrics import slot_counts, worker_counts, worker_nodes

BEATS = [
    {"name": "kg:worker:h100@a:1", "node": "h100@a", "device_class": "h100", "quarantined": "0"},
    {"name": "kg:worker:h100@a:2", "node": "h100@a", "device_class": "h100", "quarantined": "0"},
    {"name": "kg:worker:h100@b:1", "node": "h100@b", "device_class": "h100", "quarantined": "0"},
    {"name": "kg:worker:h100@b:2", "node": "h100@b", "device_class": "h100", "quarantined": "1"},
    {"name": "kg:worker:cpu@c:1", "device_class": "cpu", "quarantined": "0"},  # no node: counted by its key
]


def test_workers_are_nodes_and_one_quarantined_process_quarantines_its_node():
    assert worker_nodes(BEATS) == {
        "h100@a": ("h100", False),
        "h100@b": ("h100", True),
        "kg:worker:cpu@c:1": ("cpu", False),
    }
    assert worker_counts(BEATS) == {("h100", False): 1, ("h100", True): 1, ("cpu", False): 1}


def test_evaluation_slots_are_pool_processes():
    assert slot_counts(BEATS) == {("h100", False): 3, ("h100", True): 1, ("cpu", False): 1}
